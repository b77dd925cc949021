//! The supervisor on tokio's paused clock: pauses are asserted in virtual time, never waited for.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use tokio::sync::watch;
use tokio::time::Instant;

use super::*;

fn task<'a>(tasks: &'a [TaskStatus], name: &str) -> &'a TaskStatus {
    tasks
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed in {tasks:?}"))
}

/// Yields until `done` holds, letting the paused clock jump to the next timer.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the condition never held in 1000 s of virtual time");
}

#[tokio::test(start_paused = true)]
async fn a_task_that_fails_twice_is_restarted_twice_with_growing_pauses() {
    let tasks = Supervisor::default();
    let (stop, shutdown) = watch::channel(false);
    let starts = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let handle = tasks.spawn("flaky", shutdown.clone(), {
        let starts = starts.clone();
        let shutdown = shutdown.clone();
        move || {
            let attempt = {
                let mut starts = starts.lock().unwrap();
                starts.push(Instant::now());
                starts.len()
            };
            let mut shutdown = shutdown.clone();
            async move {
                match attempt {
                    1 => bail!("first failure"),
                    2 => panic!("second failure"),
                    _ => {
                        let _ = shutdown.wait_for(|stop| *stop).await;
                        Ok(())
                    }
                }
            }
        }
    });

    // Between the first failure and the second attempt it is backing off.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = tasks.snapshot();
    let flaky = task(&first, "flaky");
    assert_eq!((flaky.state, flaky.restarts), (TaskState::BackingOff, 1));
    assert_eq!(flaky.last_error.as_deref(), Some("first failure"));
    assert!(flaky.retry_at_ms.is_some());

    until(|| starts.lock().unwrap().len() == 3).await;
    let listed = tasks.snapshot();
    let flaky = task(&listed, "flaky");
    assert_eq!((flaky.state, flaky.restarts), (TaskState::Running, 2));
    assert_eq!(
        flaky.last_error.as_deref(),
        Some("panicked: second failure")
    );
    assert_eq!(flaky.retry_at_ms, None);
    let starts = starts.lock().unwrap().clone();
    let (pause_1, pause_2) = (starts[1] - starts[0], starts[2] - starts[1]);
    assert!(
        pause_1 >= Duration::from_secs(1) && pause_1 < Duration::from_secs(2),
        "{pause_1:?}"
    );
    assert!(
        pause_2 >= Duration::from_secs(2) && pause_2 < Duration::from_secs(4),
        "{pause_2:?}"
    );

    let metrics = crate::metrics::render_tasks(&tasks.snapshot());
    assert!(
        metrics.contains("lachesis_task_restarts_total{task=\"flaky\"} 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("lachesis_task_up{task=\"flaky\"} 1\n"),
        "{metrics}"
    );

    stop.send_replace(true);
    handle.await.unwrap();
    let stopped = tasks.snapshot();
    assert_eq!(task(&stopped, "flaky").state, TaskState::Stopped);
    assert!(
        crate::metrics::render_tasks(&stopped).contains("lachesis_task_up{task=\"flaky\"} 0\n")
    );
}

#[tokio::test(start_paused = true)]
async fn a_healthy_run_brings_the_pause_back_to_its_shortest() {
    let tasks = Supervisor::default();
    let (_stop, shutdown) = watch::channel(false);
    let starts = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let _handle = tasks.spawn("steady", shutdown, {
        let starts = starts.clone();
        move || {
            let attempt = {
                let mut starts = starts.lock().unwrap();
                starts.push(Instant::now());
                starts.len()
            };
            async move {
                // The second attempt runs healthily for two minutes before it fails.
                if attempt == 2 {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
                bail!("failure {attempt}")
            }
        }
    });
    until(|| starts.lock().unwrap().len() == 3).await;
    let starts = starts.lock().unwrap().clone();
    let pause_after_healthy = starts[2] - starts[1] - Duration::from_secs(120);
    assert!(
        pause_after_healthy >= Duration::from_secs(1)
            && pause_after_healthy < Duration::from_secs(2),
        "{pause_after_healthy:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_finished_task_stays_stopped_and_shutdown_ends_a_pause() {
    let tasks = Supervisor::default();
    let (stop, shutdown) = watch::channel(false);
    let done = tasks.spawn("done", shutdown.clone(), || async { Ok(()) });
    done.await.unwrap();

    let attempts = Arc::new(AtomicU32::new(0));
    let failing = tasks.spawn("failing", shutdown, {
        let attempts = attempts.clone();
        move || {
            attempts.fetch_add(1, Ordering::SeqCst);
            async { bail!("connect to postgres://app:s3cret@db/x failed") }
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send_replace(true);
    failing.await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 1);

    let listed = tasks.snapshot();
    assert_eq!(task(&listed, "done").state, TaskState::Stopped);
    assert_eq!(task(&listed, "done").restarts, 0);
    let failing = task(&listed, "failing");
    assert_eq!(failing.state, TaskState::Stopped);
    assert_eq!(
        failing.last_error.as_deref(),
        Some("connect to postgres://app:***@db/x failed"),
        "stored redacted"
    );
}

#[tokio::test(start_paused = true)]
async fn aborting_the_supervisor_aborts_the_running_attempt() {
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let tasks = Supervisor::default();
    let (_stop, shutdown) = watch::channel(false);
    let dropped = Arc::new(AtomicBool::new(false));
    let handle = tasks.spawn("endless", shutdown, {
        let dropped = dropped.clone();
        move || {
            let flag = Flag(dropped.clone());
            async move {
                let _flag = flag;
                std::future::pending::<anyhow::Result<()>>().await
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.abort();
    until(|| dropped.load(Ordering::SeqCst)).await;
}

#[tokio::test]
async fn names_are_made_unique_and_probes_are_listed() {
    let tasks = Supervisor::default();
    let (_stop, shutdown) = watch::channel(false);
    let a = tasks.spawn("env:x", shutdown.clone(), || async { Ok(()) });
    let b = tasks.spawn("env:x", shutdown, || async { Ok(()) });
    let _ = (a.await, b.await);
    tasks.probe("outside", || TaskStatus {
        name: String::new(),
        state: TaskState::BackingOff,
        restarts: 3,
        last_error: Some("it broke".into()),
        since_ms: 0,
        retry_at_ms: Some(1),
    });
    let names: Vec<String> = tasks.snapshot().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["env:x", "env:x#2", "outside"]);
    let outside = crate::metrics::render_tasks(&tasks.snapshot());
    assert!(outside.contains("lachesis_task_restarts_total{task=\"outside\"} 3\n"));
    assert!(outside.contains("lachesis_task_up{task=\"outside\"} 0\n"));
}

#[tokio::test(start_paused = true)]
async fn a_periodic_job_runs_each_period_after_the_first_and_a_failure_does_not_stop_it() {
    let tasks = Supervisor::default();
    let (stop, shutdown) = watch::channel(false);
    let start = Instant::now();
    let runs = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let job = move |runs: Arc<Mutex<Vec<Duration>>>| async move {
        let n = {
            let mut runs = runs.lock().unwrap();
            runs.push(start.elapsed());
            runs.len()
        };
        if n == 2 {
            bail!("the second run fails");
        }
        Ok(())
    };
    let handle = tasks.spawn_every(
        "sweep",
        Duration::from_secs(10),
        shutdown,
        runs.clone(),
        job,
    );
    until(|| runs.lock().unwrap().len() >= 4).await;
    let at: Vec<u64> = runs.lock().unwrap().iter().map(|d| d.as_secs()).collect();
    // Not at the start, then every ten seconds, the failed second run included.
    assert_eq!(at[..4], [10, 20, 30, 40]);
    assert_eq!(task(&tasks.snapshot(), "sweep").restarts, 0);
    stop.send(true).unwrap();
    handle.await.unwrap();
    assert_eq!(task(&tasks.snapshot(), "sweep").state, TaskState::Stopped);
}
