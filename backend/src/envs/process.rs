//! Process mode (atroposlib's `process` subcommand): roll out N groups with no trajectory API,
//! write each as one `ScoredData` JSON line to FILE.jsonl, then render FILE.html next to it, a
//! self-contained page to read the rollouts (atroposlib's `jsonl2html.py`).
//!
//! As atroposlib's process mode, messages are always included, groups with equal scores are kept
//! (they are worth reading) and there is no length limit; only malformed groups are skipped.

use std::fmt::Write as _;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use lachesis_shared::atropos::ScoredData;

use super::pacing::{Verdict, check_group};
use super::{EnvError, Environment};
use crate::policy::Policy;

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessConfig {
    /// FILE.jsonl, created afresh; the viewer goes to the same path with `.html`.
    pub out: PathBuf,
    pub groups: usize,
    /// Give up after this many items that produced no usable group (a broken policy would
    /// otherwise loop forever, as atroposlib's does).
    pub max_failures: usize,
}

impl ProcessConfig {
    pub fn new(out: impl Into<PathBuf>, groups: usize) -> Self {
        Self {
            out: out.into(),
            groups,
            max_failures: groups.saturating_mul(4).max(16),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessReport {
    pub jsonl: PathBuf,
    pub html: PathBuf,
    pub groups_written: usize,
    pub failures: usize,
}

pub async fn process(
    env: &dyn Environment,
    policy: &dyn Policy,
    config: &ProcessConfig,
) -> Result<ProcessReport, EnvError> {
    env.setup().await?;
    let group_size = env.config().group_size;
    if let Some(dir) = config.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = BufWriter::new(std::fs::File::create(&config.out)?);
    let (mut written, mut failures) = (0, 0);
    while written < config.groups && failures < config.max_failures {
        let Some(item) = env.next_item().await? else {
            tracing::info!("the environment has no more items");
            break;
        };
        let group = match env.collect(item, policy).await {
            Ok(collected) => collected.group,
            Err(e) => {
                tracing::warn!(error = %e, "collect failed");
                None
            }
        };
        let Some(group) = group else {
            failures += 1;
            continue;
        };
        let data = group.to_scored_data(None, true);
        if let verdict @ Verdict::WrongSize { .. } = check_group(&data, group_size, false, -1) {
            tracing::warn!(?verdict, "group skipped");
            failures += 1;
            continue;
        }
        serde_json::to_writer(&mut file, &data).map_err(|e| EnvError::Other(e.to_string()))?;
        file.write_all(b"\n")?;
        written += 1;
        tracing::info!("processed group {written}/{}", config.groups);
    }
    file.flush()?;
    drop(file);
    let html = write_html(&config.out)?;
    Ok(ProcessReport {
        jsonl: config.out.clone(),
        html,
        groups_written: written,
        failures,
    })
}

/// Renders `jsonl` (one ScoredData per line) as `jsonl` with the extension `.html`. Lines that
/// are not groups are skipped, as jsonl2html does.
pub fn write_html(jsonl: &Path) -> Result<PathBuf, EnvError> {
    let reader = std::io::BufReader::new(std::fs::File::open(jsonl)?);
    let mut groups = Vec::new();
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ScoredData>(&line) {
            Ok(group) => groups.push(group),
            Err(e) => tracing::warn!(error = %e, "skipping a line that is not a scored group"),
        }
    }
    let title = jsonl
        .file_name()
        .map_or_else(|| "rollouts".into(), |n| n.to_string_lossy().into_owned());
    let out = jsonl.with_extension("html");
    std::fs::write(&out, render_html(&title, &groups))?;
    Ok(out)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;\
padding:0 1rem;color:#1d2329;background:#fafafa}h1{font-size:1.4rem}\
details{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:.6rem 0;\
padding:.4rem .8rem}summary{cursor:pointer;font-weight:600}\
.seq{border-left:4px solid #d0d7de;margin:.8rem 0;padding:.2rem .8rem}\
.positive{border-color:#2da44e}.negative{border-color:#cf222e}.zero{border-color:#9a6700}\
.role{font-size:.75rem;text-transform:uppercase;color:#57606a;margin-top:.5rem}\
pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0;font-family:ui-monospace,monospace;\
font-size:.85rem;background:#f6f8fa;padding:.4rem;border-radius:4px}.score{font-weight:600}";

/// The viewer page: one collapsible section per group, each sequence's messages and score.
/// Everything from the file is HTML-escaped; the page loads nothing from anywhere.
pub fn render_html(title: &str, groups: &[ScoredData]) -> String {
    let mut page = String::with_capacity(4096 + groups.len() * 2048);
    let title = escape(title);
    let _ = writeln!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\n\
         <h1>{title}</h1>\n<p>{} groups</p>",
        groups.len()
    );
    for (g, group) in groups.iter().enumerate() {
        let mean = if group.scores.is_empty() {
            0.0
        } else {
            group.scores.iter().sum::<f64>() / group.scores.len() as f64
        };
        let _ = writeln!(
            page,
            "<details{}><summary>Group {g}: {} sequences, mean score {mean:.3}</summary>",
            if g == 0 { " open" } else { "" },
            group.tokens.len(),
        );
        for (i, tokens) in group.tokens.iter().enumerate() {
            let score = group.scores.get(i).copied();
            let class = match score {
                Some(s) if s > 0.0 => "positive",
                Some(s) if s < 0.0 => "negative",
                _ => "zero",
            };
            let generated = group
                .masks
                .get(i)
                .map_or(0, |m| m.iter().filter(|&&t| t != -100).count());
            let score_text = score.map_or_else(|| "none".into(), |s| format!("{s}"));
            let _ = writeln!(
                page,
                "<div class=\"seq {class}\" id=\"group-{g}-seq-{i}\"><div>Sequence {i} · \
                 <span class=\"score\">score {}</span> · {} tokens, {generated} generated</div>",
                escape(&score_text),
                tokens.len(),
            );
            match group.messages.as_ref().and_then(|m| m.get(i)) {
                Some(messages) => {
                    for message in messages {
                        let field = |key: &str| match message.get(key) {
                            Some(serde_json::Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        let _ = writeln!(
                            page,
                            "<div class=\"role\">{}</div><pre>{}</pre>",
                            escape(&field("role")),
                            escape(&field("content"))
                        );
                    }
                }
                None => page.push_str("<pre>(no messages were recorded for this sequence)</pre>\n"),
            }
            page.push_str("</div>\n");
        }
        page.push_str("</details>\n");
    }
    page.push_str("</body></html>\n");
    page
}

/// Text made safe for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::arithmetic::baseline::BaselinePolicy;
    use crate::envs::{EnvOptions, TempDir, build};

    #[tokio::test]
    async fn process_mode_writes_groups_as_jsonl_and_a_viewer_next_to_it() {
        let dir = TempDir::new("process");
        let options = EnvOptions {
            seed: 11,
            group_size: Some(3),
            ..EnvOptions::default()
        };
        let env = build("arithmetic", &options).unwrap();
        let policy = BaselinePolicy::new(0.5, 5, None);
        let config = ProcessConfig::new(dir.0.join("out/groups.jsonl"), 4);
        let report = process(env.as_ref(), &policy, &config)
            .await
            .expect("processes");
        assert_eq!(report.groups_written, 4);
        assert_eq!(report.html, dir.0.join("out/groups.html"));

        let text = std::fs::read_to_string(&report.jsonl).unwrap();
        let groups: Vec<ScoredData> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is a ScoredData"))
            .collect();
        assert_eq!(groups.len(), 4);
        for g in &groups {
            assert_eq!(g.group_size(), 3);
            assert_eq!(g.masks.len(), 3);
            let messages = g.messages.as_ref().expect("process mode includes messages");
            assert_eq!(messages[0].last().unwrap()["role"], "assistant");
            assert!(g.inference_logprobs.is_some() && g.generation_params.is_some());
        }
        // Optional fields are written out as null, as atroposlib's trainers expect every key.
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(first["ref_logprobs"].is_null() && first.get("advantages").is_some());

        let html = std::fs::read_to_string(&report.html).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<details").count(), 4);
        assert!(html.contains("What is "));
        assert!(!html.contains("<script") && !html.contains("<link"));
    }

    #[test]
    fn everything_from_the_file_is_escaped() {
        let group = ScoredData {
            tokens: vec![vec![1]],
            masks: vec![vec![1]],
            scores: vec![-1.0],
            messages: Some(vec![vec![serde_json::Map::from_iter([
                ("role".to_string(), serde_json::json!("<b>user</b>")),
                (
                    "content".to_string(),
                    serde_json::json!("<script>alert('x')</script> & \"q\""),
                ),
            ])]]),
            ..ScoredData::default()
        };
        let html = render_html("<title>", &[group]);
        assert!(!html.contains("<script>") && !html.contains("<b>"));
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;")
        );
        assert!(html.contains("seq negative"));
    }
}
