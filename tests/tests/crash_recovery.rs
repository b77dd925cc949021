//! SIGKILL while groups are being posted and batches pulled: after a restart every acknowledged
//! group is served exactly once (or still waits, in the queue or its env's buffer, or was in the
//! one batch whose answer the kill cut off), and no batch is served twice.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lachesis::trajectory::store::decode_payload;
use lachesis_tests::{
    ServerProcess, client, env_registration, fresh_database, group, markers, registration,
};
use serde_json::Value;

const POSTERS: i64 = 6;

#[tokio::test]
async fn sigkill_during_posting_loses_and_duplicates_nothing() {
    let database_url = fresh_database().await;
    let server = ServerProcess::start(&database_url)
        .await
        .expect("start the server");
    let http = client();
    let base = server.base.clone();
    let post = |path: &str, body: Value| http.post(format!("{base}{path}")).json(&body).send();
    post("/register", registration(8))
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    http.get(format!("{base}/batch"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    post("/register-env", env_registration("crash", 4))
        .await
        .unwrap()
        .error_for_status()
        .unwrap();

    // Posters: most groups have the env's size; every third is half-sized and goes through the buffer.
    let acked: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let mut posters = Vec::new();
    for poster in 0..POSTERS {
        let (http, base, acked) = (http.clone(), base.clone(), acked.clone());
        posters.push(tokio::spawn(async move {
            for i in 0.. {
                let marker = poster * 1_000_000 + i;
                let size = if i % 3 == 0 { 2 } else { 4 };
                let sent = http
                    .post(format!("{base}/scored_data"))
                    .json(&group(marker, size, Some(0)))
                    .send()
                    .await;
                match sent {
                    Ok(resp) if resp.status().is_success() => {
                        if resp.json::<Value>().await.is_ok() {
                            acked.lock().unwrap().insert(marker);
                        }
                    }
                    _ => break,
                }
            }
        }));
    }
    // A trainer pulls batches at the same time.
    let served: Arc<Mutex<Vec<i64>>> = Arc::default();
    let trainer = {
        let (http, base, served) = (http.clone(), base.clone(), served.clone());
        tokio::spawn(async move {
            loop {
                let Ok(resp) = http.get(format!("{base}/batch")).send().await else {
                    break;
                };
                let Ok(batch) = resp.json::<Value>().await else {
                    break;
                };
                served.lock().unwrap().extend(markers(&batch));
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    };

    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill9().await;
    for poster in posters {
        poster.await.unwrap();
    }
    trainer.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    let served_before = served.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "the posters got going before the crash ({} acknowledged)",
        acked.len()
    );
    assert!(
        !served_before.is_empty(),
        "the trainer pulled batches before the crash"
    );

    // Restart on the same database and drain every batch that can be formed.
    let server = ServerProcess::start(&database_url)
        .await
        .expect("restart the server");
    let mut served_after = Vec::new();
    loop {
        let batch: Value = http
            .get(format!("{}/batch", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if batch["batch"].is_null() {
            break;
        }
        let got = markers(&batch);
        let seqs: usize = batch["batch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["tokens"].as_array().unwrap().len())
            .sum();
        assert_eq!(seqs, 8, "every batch holds exactly batch_size sequences");
        served_after.extend(got);
    }

    // What legitimately still waits, read from the database: half-sized groups without a partner,
    // and queued groups too few to fill one more batch.
    let db = sqlx::PgPool::connect(&database_url).await.unwrap();
    let waiting: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT state, payload FROM groups WHERE state <> 'batched'")
            .fetch_all(&db)
            .await
            .unwrap();
    let mut still_waiting = HashSet::new();
    let mut queued_seqs = 0;
    for (state, payload) in &waiting {
        let group: Value = serde_json::from_slice(&decode_payload(payload).unwrap()).unwrap();
        if state == "queued" {
            queued_seqs += group["tokens"].as_array().unwrap().len();
        }
        still_waiting.insert(group["tokens"][0][0].as_i64().unwrap());
    }
    assert!(
        queued_seqs < 8,
        "after draining, fewer than batch_size sequences stay queued ({queued_seqs})"
    );

    eprintln!(
        "acknowledged {}, served before the kill {}, after the restart {}, still waiting {}",
        acked.len(),
        served_before.len(),
        served_after.len(),
        still_waiting.len()
    );
    let mut times_served: HashMap<i64, usize> = HashMap::new();
    for marker in served_before.iter().chain(&served_after) {
        *times_served.entry(*marker).or_default() += 1;
    }
    let twice: Vec<_> = times_served.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "groups served more than once: {twice:?}");
    // A batch is marked served when its answer is written; one the kill cut off mid-answer was
    // served by the server yet never read by the trainer. The trainer reads one batch at a time,
    // so at most one batch can be in flight: anything else missing is a real loss.
    let in_flight: Vec<(i64, Vec<u8>)> = sqlx::query_as(
        "SELECT g.batch_id, g.payload FROM groups g JOIN batches b ON b.id = g.batch_id \
         WHERE g.state = 'batched' AND b.served_at IS NOT NULL",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let batch_of: HashMap<i64, i64> = in_flight
        .iter()
        .map(|(batch, payload)| {
            let group: Value = serde_json::from_slice(&decode_payload(payload).unwrap()).unwrap();
            (group["tokens"][0][0].as_i64().unwrap(), *batch)
        })
        .collect();
    let missing: Vec<i64> = acked
        .iter()
        .copied()
        .filter(|m| !times_served.contains_key(m) && !still_waiting.contains(m))
        .collect();
    let lost: Vec<_> = missing
        .iter()
        .filter(|m| !batch_of.contains_key(m))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged groups were lost: {:?}",
        lost.len(),
        lost.iter().take(10).collect::<Vec<_>>()
    );
    let cut_off: HashSet<i64> = missing.iter().map(|m| batch_of[m]).collect();
    assert!(
        cut_off.len() <= 1,
        "only the batch being answered at the kill may go unread, not {cut_off:?} ({missing:?})"
    );
    assert!(
        !served_after.is_empty(),
        "groups queued before the crash are served after it"
    );
    server.kill9().await;
}
