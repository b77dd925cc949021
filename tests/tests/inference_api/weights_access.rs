//! Who may load weights, and what a load may read: the admin alone, bad folders and oversized
//! files refused with nothing changed.

use candle_core::{Device, Tensor};
use lachesis::trainer::sync::{RemoteReload, VllmLora, WeightSync};
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use serde_json::{Value, json};

use super::weights::{call, lora_trainer, perturb, scratch};

const ADMIN_TOKEN: &str = "the-admins-secret-token";

/// `POST /v1/load_lora_adapter` as the admin.
async fn admin_loads(app: &TestApp, name: &str, folder: &std::path::Path) -> (u16, Value) {
    let body = json!({"lora_name": name, "lora_path": folder});
    call(app, "/v1/load_lora_adapter", &body, Some(ADMIN_TOKEN)).await
}

/// Loading weights is the admin's: tokens (even with the inference scope), sessions and strangers
/// are refused, bad folders and oversized files change nothing, and the limits hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_admin_loads_weights_and_bad_loads_change_nothing() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.auth = true;
    config.api_token = Some(ADMIN_TOKEN.into());
    config.inference_limits.max_lora_adapters = 1;
    let app = TestApp::spawn_with(config).await;
    let admin = Some(ADMIN_TOKEN);
    let owner = lachesis_tests::sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let token = app
        .new_token(&owner, "lab", json!({"name": "caller", "inference": true}))
        .await;

    let (trainer, _) = lora_trainer();
    perturb(&trainer, 3.0);
    let dir = scratch("hostile");
    let mut sync = WeightSync::VllmLora(VllmLora::new(&app.base, "mine", Some(token.clone())));
    let refused = sync.sync(&trainer, None, &dir, "smollm2", 1).await;
    assert!(refused.is_err(), "a team token loaded weights");
    let load = json!({"lora_name": "mine", "lora_path": dir});
    for bearer in [None, Some(token.as_str())] {
        let (status, _) = call(&app, "/v1/load_lora_adapter", &load, bearer).await;
        assert_eq!(status, 401, "{bearer:?}");
        let (status, _) = call(
            &app,
            "/update_weights_from_disk",
            &json!({"model_path": dir}),
            bearer,
        )
        .await;
        assert_eq!(status, 401, "{bearer:?}");
    }
    let session = app
        .client
        .post(app.url("/v1/load_lora_adapter"))
        .header("cookie", &owner.0)
        .header("x-csrf-token", &owner.1)
        .json(&load)
        .send()
        .await
        .unwrap();
    assert_eq!(session.status().as_u16(), 401);

    // Folders that are not adapters, or are the wrong shape, are typed refusals.
    let not_there = json!({"lora_name": "x", "lora_path": "/nonexistent/adapter"});
    let relative = json!({"lora_name": "x", "lora_path": "adapter"});
    let a_file = json!({"lora_name": "x", "lora_path": model_path()});
    let no_name = json!({"lora_name": "", "lora_path": dir});
    for body in [&not_there, &relative, &a_file, &no_name] {
        let (status, answer) = call(&app, "/v1/load_lora_adapter", body, admin).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["object"], "error");
    }
    let foreign = scratch("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(
        foreign.join("adapter_config.json"),
        r#"{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["wq"]}"#,
    )
    .unwrap();
    std::fs::write(foreign.join("adapter_model.safetensors"), b"not tensors").unwrap();
    let (status, answer) = admin_loads(&app, "x", &foreign).await;
    assert_eq!(status, 400);
    assert!(
        answer["message"].as_str().unwrap().contains("\"wq\""),
        "{answer}"
    );

    // The trainer's own tensors under a config that does not describe them, or beside a tensor
    // that is no LoRA matrix of its targets, are refused with what does not fit.
    let tensors =
        candle_core::safetensors::load(dir.join("adapter_model.safetensors"), &Device::Cpu)
            .unwrap();
    let config = |r: usize, targets: &str| {
        format!(
            r#"{{"peft_type": "LORA", "r": {r}, "lora_alpha": 16, "target_modules": {targets}}}"#
        )
    };
    let mut extra = tensors.clone();
    extra.insert(
        "base_model.model.lm_head.weight".into(),
        Tensor::zeros((2, 2), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    let misfits = [
        (config(4, r#"["q_proj", "v_proj"]"#), &tensors, "not rank 4"),
        (
            config(8, r#"["q_proj", "k_proj", "v_proj"]"#),
            &tensors,
            "k_proj.lora_A.weight",
        ),
        (config(8, r#"["q_proj", "v_proj"]"#), &extra, "lm_head"),
    ];
    for (adapter_config, adapter_tensors, named) in misfits {
        std::fs::write(foreign.join("adapter_config.json"), &adapter_config).unwrap();
        candle_core::safetensors::save(adapter_tensors, foreign.join("adapter_model.safetensors"))
            .unwrap();
        let (status, answer) = admin_loads(&app, "x", &foreign).await;
        assert_eq!(status, 400, "{adapter_config}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(named),
            "{adapter_config}: {answer}"
        );
    }

    // The real adapter loads for the admin; a second name is over the limit of one.
    // (The refused sync above wrote the adapter's folder before asking.)
    let mut admin_sync = VllmLora::new(&app.base, "mine", admin.map(str::to_owned));
    assert_eq!(admin_sync.load(&dir).await.expect("the admin loads"), 1);
    let (status, answer) = admin_loads(&app, "other", &dir).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("--inference-max-lora-adapters")
    );
    let (status, _) = admin_loads(&app, "mine", &dir).await;
    assert_eq!(status, 400, "the name is taken");

    // A full reload from a folder that is not a model changes nothing.
    let (status, answer) = call(
        &app,
        "/update_weights_from_disk",
        &json!({"model_path": foreign}),
        admin,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["success"], false);
    let probe = json!({"prompt": "Hello", "max_tokens": 1, "temperature": 0});
    let (status, answer) = call(&app, "/v1/completions", &probe, Some(&token)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["weight_version"], 0, "the base was not replaced");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&foreign);
}

/// `--inference-max-weights-mib` bounds what a load reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_over_the_size_limit_are_refused_before_reading() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.inference_limits.max_weights_bytes = 1024;
    let app = TestApp::spawn_with(config).await;
    let (trainer, tokenizer) = lora_trainer();
    let dir = scratch("large");
    let mut sync = WeightSync::VllmLora(VllmLora::new(&app.base, "big", None));
    let error = sync
        .sync(&trainer, None, &dir, "smollm2", 1)
        .await
        .expect_err("an adapter of more than 1 KiB");
    assert!(error.to_string().contains("413"), "{error}");
    let full = scratch("large-full");
    let mut reload = WeightSync::Reload(RemoteReload::new(&app.base, None));
    let error = reload
        .sync(&trainer, Some(&tokenizer), &full, "smollm2", 1)
        .await
        .expect_err("a model of more than 1 KiB");
    assert!(
        error.to_string().contains("--inference-max-weights-mib"),
        "{error}"
    );
    let models = app.get("/v1/models").await;
    assert_eq!(models["data"].as_array().unwrap().len(), 1, "no adapter");
    assert_eq!(models["data"][0]["weight_version"], 0);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&full);
}
