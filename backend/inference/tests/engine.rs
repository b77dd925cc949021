//! The embedded engine against the real SmolLM2-135M GGUF (`LACHESIS_MODEL`, fetched by the
//! README's test command).

use std::path::PathBuf;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use lachesis_inference::llama::Llama;
use lachesis_inference::{
    ChatMessage, Engine, EngineError, EngineOptions, FinishReason, GenerateRequest,
    IncrementalText, Precision, SamplingParams,
};

fn model_path() -> PathBuf {
    let path = PathBuf::from(
        std::env::var_os("LACHESIS_MODEL").expect("set LACHESIS_MODEL to the SmolLM2 GGUF"),
    );
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

fn engine() -> Engine {
    Engine::load(&model_path(), EngineOptions::default()).expect("the model loads")
}

fn greedy(max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        max_tokens,
        ..SamplingParams::default()
    }
}

fn chat_prompt(engine: &Engine, question: &str) -> Vec<u32> {
    let text = engine
        .tokenizer()
        .apply_chat_template(&[ChatMessage::new("user", question)], true)
        .unwrap();
    engine.tokenizer().encode(&text).unwrap()
}

#[test]
fn our_forward_pass_matches_candle_transformers_llama() {
    let path = model_path();
    let mut file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let ours = Llama::from_gguf(&content, &mut file, 4096, Precision::Stored).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut theirs = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();

    let prompt = [1u32, 4093, 198, 2683, 314, 216, 34, 30, 34, 47, 2, 198];
    let input = Tensor::new(&prompt[..], &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let mut cache = ours.new_cache();
    let a: Vec<f32> = ours
        .forward(&input, 0, &mut cache, false)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let b: Vec<f32> = theirs
        .forward(&input, 0)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-3, "logits differ by up to {worst}");

    // One more token through both caches.
    let next = Tensor::new(&[28u32], &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let a: Vec<f32> = ours
        .forward(&next, prompt.len(), &mut cache, false)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let b: Vec<f32> = theirs
        .forward(&next, prompt.len())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-3, "cached step logits differ by up to {worst}");
}

#[tokio::test]
async fn greedy_chat_answers_two_plus_two() {
    let engine = engine();
    let prompt = chat_prompt(&engine, "What is 2+2?");
    let generation = engine
        .generate(GenerateRequest {
            prompt,
            params: greedy(24),
        })
        .await
        .unwrap();
    let answer = &generation.choices[0];
    assert!(answer.text.contains('4'), "answer: {:?}", answer.text);
    assert_eq!(answer.tokens.len(), answer.logprobs.len());
    assert!(
        answer
            .logprobs
            .iter()
            .all(|lp| lp.logprob <= 0.0 && lp.logprob.is_finite())
    );
}

#[tokio::test]
async fn batched_answers_equal_the_single_answer() {
    let engine = engine();
    let prompt = chat_prompt(&engine, "Name a colour.");
    let one = engine
        .generate(GenerateRequest {
            prompt: prompt.clone(),
            params: greedy(12),
        })
        .await
        .unwrap();
    let three = engine
        .generate(GenerateRequest {
            prompt,
            params: SamplingParams { n: 3, ..greedy(12) },
        })
        .await
        .unwrap();
    assert_eq!(three.choices.len(), 3);
    for choice in &three.choices {
        assert_eq!(choice.tokens, one.choices[0].tokens);
        for (a, b) in choice.logprobs.iter().zip(&one.choices[0].logprobs) {
            assert!(
                (a.logprob - b.logprob).abs() < 1e-3,
                "{} vs {}",
                a.logprob,
                b.logprob
            );
        }
    }
}

#[tokio::test]
async fn streamed_tokens_arrive_before_the_answer_and_equal_it() {
    let engine = engine();
    let prompt = chat_prompt(&engine, "Name three colours.");
    let (sink, mut streamed) = tokio::sync::mpsc::unbounded_channel();
    let request = GenerateRequest {
        prompt,
        params: SamplingParams {
            n: 2,
            temperature: 0.9,
            seed: Some(7),
            ..greedy(16)
        },
    };
    let generating = engine.generate_streaming(request, sink);
    tokio::pin!(generating);
    // The first token is read while the generation is still running.
    let first = tokio::select! {
        token = streamed.recv() => token.expect("a token before the end"),
        _ = &mut generating => panic!("the answer finished before any token was streamed"),
    };
    let generation = generating.await.unwrap();
    let mut per_choice = vec![Vec::new(), Vec::new()];
    per_choice[first.choice].push(first.token);
    while let Ok(token) = streamed.try_recv() {
        per_choice[token.choice].push(token.token);
    }
    for (choice, tokens) in generation.choices.iter().zip(&per_choice) {
        assert_eq!(&choice.tokens, tokens);
    }
}

#[test]
fn text_decoded_token_by_token_is_the_text_decoded_at_once() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    let ids = tokenizer
        .encode(" A café for the cat 🐱, naïve 日本語 — and “quotes”.\n\nDone.")
        .unwrap();
    let mut text = IncrementalText::default();
    for (i, &id) in ids.iter().enumerate() {
        text.push(id);
        let whole = tokenizer.decode(&ids[..=i]).unwrap();
        assert_eq!(
            text.text(tokenizer, false).unwrap(),
            whole,
            "after {} tokens",
            i + 1
        );
    }
    // Leaving out a last token (an end-of-sequence one) gives the text before it.
    text.push(tokenizer.eos_token_id());
    assert_eq!(
        text.text(tokenizer, true).unwrap(),
        tokenizer.decode(&ids).unwrap()
    );
}

/// How far the logprob of each greedily decoded token moves when the same tokens are read back as
/// a prompt.
async fn rescoring_gaps(engine: &Engine) -> Vec<f32> {
    let prompt = chat_prompt(engine, "Count to five.");
    let generated = engine
        .generate(GenerateRequest {
            prompt: prompt.clone(),
            params: greedy(6),
        })
        .await
        .unwrap();
    let mut extended = prompt.clone();
    extended.extend(&generated.choices[0].tokens);
    let scored = engine
        .generate(GenerateRequest {
            prompt: extended,
            params: SamplingParams {
                prompt_logprobs: Some(2),
                ..greedy(1)
            },
        })
        .await
        .unwrap();
    let prompt_lps = scored
        .prompt_logprobs
        .expect("prompt logprobs were asked for");
    assert!(prompt_lps[0].is_none());
    let mut gaps = Vec::new();
    for (i, decoded) in generated.choices[0].logprobs.iter().enumerate() {
        let rescored = prompt_lps[prompt.len() + i].as_ref().unwrap();
        assert_eq!(rescored.token, decoded.token);
        assert_eq!(rescored.top.len(), 2);
        gaps.push((rescored.logprob - decoded.logprob).abs());
    }
    gaps
}

#[tokio::test]
async fn prompt_logprobs_agree_with_decoding_logprobs() {
    // With dense weights nothing is quantized, and the prompt's pass and the decoding steps
    // compute the same sums in another order: they agree to f32 rounding on any CPU (measured:
    // 1e-6 to 7e-6 nats).
    let dense = Engine::load(
        &model_path(),
        EngineOptions {
            precision: Precision::F32,
            ..EngineOptions::default()
        },
    )
    .unwrap();
    let gaps = rescoring_gaps(&dense).await;
    let worst = gaps.iter().copied().fold(0f32, f32::max);
    assert!(worst < 1e-3, "dense weights: {gaps:?}");

    // Quantized, both paths round activations to 8 bits before each matrix product, and a value
    // on a rounding boundary in one path and not in the other moves the answer by a few
    // hundredths of a nat. How far depends on the CPU's kernel: on AVX-512 VNNI candle quantizes
    // 256 values per scale, on AVX2 alone 32, and there five prompts of 16 tokens disagreed by
    // 0.04 nats on average and 0.16 at worst (a probability ratio of 1.17, inside GRPO's clip).
    let gaps = rescoring_gaps(&engine()).await;
    for (i, gap) in gaps.iter().enumerate() {
        assert!(*gap < 0.25, "position {i}: {gaps:?}");
    }
    let mean = gaps.iter().sum::<f32>() / gaps.len() as f32;
    assert!(mean < 0.1, "mean drift {mean}: {gaps:?}");
}

#[tokio::test]
async fn stop_strings_and_max_tokens_end_answers() {
    let engine = engine();
    let prompt = chat_prompt(&engine, "List three fruits, one per line.");
    let short = engine
        .generate(GenerateRequest {
            prompt: prompt.clone(),
            params: greedy(3),
        })
        .await
        .unwrap();
    assert_eq!(short.choices[0].finish_reason, FinishReason::Length);
    assert_eq!(short.choices[0].tokens.len(), 3);

    let full = engine
        .generate(GenerateRequest {
            prompt: prompt.clone(),
            params: greedy(40),
        })
        .await
        .unwrap();
    let text = &full.choices[0].text;
    let stop = text.chars().skip(3).take(2).collect::<String>();
    let cut = engine
        .generate(GenerateRequest {
            prompt,
            params: SamplingParams {
                stop: vec![stop.clone()],
                ..greedy(40)
            },
        })
        .await
        .unwrap();
    assert_eq!(cut.choices[0].finish_reason, FinishReason::Stop);
    assert!(
        !cut.choices[0].text.contains(&stop),
        "{:?} still holds {stop:?}",
        cut.choices[0].text
    );
    assert!(text.starts_with(&cut.choices[0].text));
}

#[tokio::test]
async fn impossible_requests_get_typed_errors() {
    let engine = engine();
    let vocab = engine.info().vocab_size as u32;
    let out_of_vocab = engine
        .generate(GenerateRequest {
            prompt: vec![1, vocab + 5],
            params: greedy(2),
        })
        .await;
    assert!(
        matches!(out_of_vocab, Err(EngineError::InvalidRequest(_))),
        "{out_of_vocab:?}"
    );
    let empty = engine
        .generate(GenerateRequest {
            prompt: vec![],
            params: greedy(2),
        })
        .await;
    assert!(matches!(empty, Err(EngineError::InvalidRequest(_))));
    let too_long = engine
        .generate(GenerateRequest {
            prompt: vec![1; 10],
            params: greedy(1_000_000),
        })
        .await;
    assert!(
        matches!(too_long, Err(EngineError::ContextLength { .. })),
        "{too_long:?}"
    );
    // The engine still answers afterwards.
    let fine = engine
        .generate(GenerateRequest {
            prompt: vec![1, 2],
            params: greedy(1),
        })
        .await;
    assert!(fine.is_ok());
}

#[test]
fn the_tokenizer_round_trips_text_and_splits_digits() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    for text in [
        "Hello, world!",
        "  spaces\tand\nnewlines ",
        "naïve café ☕ 🚀",
        "x = 12345 * 678",
    ] {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(tokenizer.decode(&ids).unwrap(), text);
    }
    // SmolLM2 reads numbers digit by digit.
    assert_eq!(tokenizer.encode("12345").unwrap().len(), 5);
    let chat = tokenizer
        .apply_chat_template(&[ChatMessage::new("user", "hi")], true)
        .unwrap();
    assert!(chat.ends_with("<|im_start|>assistant\n"), "{chat:?}");
    let ids = tokenizer.encode(&chat).unwrap();
    assert_eq!(ids[0], 1, "<|im_start|> is one special token");
}
