//! Tasks drawn from a seed and the servers' live tool lists. Each comes with the world it needs
//! (files written before the episode), a plan of calls that solves it, and a check of the
//! outcome: what is on disk, in the memory graph or in the git log afterwards, or whether the
//! final answer equals what the tools computed. A template whose tools are missing from the live
//! lists, or whose planned calls its live schemas refuse, is never drawn.

use std::collections::BTreeSet;

use lachesis_shared::tools::{ToolSpec, check_call};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::sandbox::ServerKind;

/// A call the plan makes, and which server answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCall {
    pub server: ServerKind,
    pub tool: String,
    pub arguments: Map<String, Value>,
}

/// How the plan's final answer is found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlannedAnswer {
    /// Says this.
    Text(String),
    /// The last integer in the last tool result (results say what they were given first).
    NumberFromLastResult,
}

/// What must hold after the episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Check {
    /// `files/<path>` holds exactly `content`.
    FileHolds { path: String, content: String },
    /// `files/<to>` holds `content` and `files/<from>` is gone.
    FileMoved {
        from: String,
        to: String,
        content: String,
    },
    /// The memory graph has the relation.
    MemoryRelation {
        from: String,
        to: String,
        relation: String,
    },
    /// The memory graph has the entity with the observation.
    MemoryObservation { entity: String, observation: String },
    /// The repository's last commit has `message` and holds `path` with `content`.
    Committed {
        message: String,
        path: String,
        content: String,
    },
    /// The repository has a branch of this name.
    Branch { name: String },
    /// The final answer's first integer is `value`.
    AnswerIs { value: i64 },
}

impl Check {
    /// What the check looks at, in a line for people.
    pub fn describe(&self) -> String {
        match self {
            Check::FileHolds { path, content } => format!("`{path}` holds {content:?}"),
            Check::FileMoved { from, to, .. } => format!("`{from}` was moved to `{to}`"),
            Check::MemoryRelation { from, to, relation } => {
                format!("the memory graph has {from} -{relation}-> {to}")
            }
            Check::MemoryObservation {
                entity,
                observation,
            } => format!("the memory graph says {entity} {observation}"),
            Check::Committed { message, path, .. } => {
                format!("the last commit is {message:?} and holds `{path}`")
            }
            Check::Branch { name } => format!("the branch `{name}` exists"),
            Check::AnswerIs { value } => format!("the answer is {value}"),
        }
    }
}

/// Something written into the world before the episode starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seeded {
    /// Relative to `files/`.
    pub path: String,
    pub content: String,
}

/// One generated task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub template: String,
    pub prompt: String,
    pub servers: BTreeSet<ServerKind>,
    pub seeded: Vec<Seeded>,
    pub plan: Vec<PlannedCall>,
    pub answer: PlannedAnswer,
    pub check: Check,
}

/// The tools each server offers, as discovered.
pub type Catalogue = Vec<(ServerKind, Vec<ToolSpec>)>;

const NOUNS: [&str; 12] = [
    "otter", "lantern", "harbor", "quartz", "meadow", "falcon", "cedar", "comet", "violin",
    "glacier", "pepper", "saddle",
];
const ADJECTIVES: [&str; 8] = [
    "amber", "brisk", "calm", "dusty", "eager", "faint", "gentle", "hollow",
];
const PEOPLE: [&str; 8] = [
    "Ada", "Boris", "Chiara", "Dmitri", "Esi", "Farah", "Goran", "Hana",
];
const ORGS: [&str; 6] = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"];
const RELATIONS: [&str; 3] = ["works_at", "advises", "invests_in"];

type Template = fn(&mut StdRng) -> Task;

/// Every task template; each names the servers and tools its plan uses.
const TEMPLATES: [Template; 8] = [
    write_file,
    read_and_answer,
    move_file,
    make_directory_and_write,
    memory_relation,
    memory_observation,
    git_commit,
    git_branch,
];
const SUM: Template = sum;

fn word(rng: &mut StdRng) -> String {
    format!(
        "{}-{}-{}",
        ADJECTIVES.choose(rng).copied().unwrap_or("calm"),
        NOUNS.choose(rng).copied().unwrap_or("otter"),
        rng.random_range(10..100)
    )
}

fn pick<'a>(rng: &mut StdRng, from: &[&'a str]) -> &'a str {
    from.choose(rng).copied().unwrap_or(from[0])
}

fn call(server: ServerKind, tool: &str, arguments: Value) -> PlannedCall {
    PlannedCall {
        server,
        tool: tool.into(),
        arguments: arguments.as_object().cloned().unwrap_or_default(),
    }
}

fn task(template: &str, prompt: String, plan: Vec<PlannedCall>, check: Check) -> Task {
    Task {
        template: template.into(),
        prompt,
        servers: plan.iter().map(|c| c.server).collect(),
        seeded: Vec::new(),
        plan,
        answer: PlannedAnswer::Text("Done.".into()),
        check,
    }
}

/// A task answered with the number its one call returns.
fn number_task(template: &str, prompt: String, planned: PlannedCall, value: i64) -> Task {
    Task {
        answer: PlannedAnswer::NumberFromLastResult,
        ..task(template, prompt, vec![planned], Check::AnswerIs { value })
    }
}

fn write_file(rng: &mut StdRng) -> Task {
    let path = format!("{}.txt", word(rng));
    let content = format!("{} {}", pick(rng, &ADJECTIVES), pick(rng, &NOUNS));
    task(
        "write_file",
        format!("Create the file `{path}` containing exactly `{content}`."),
        vec![call(
            ServerKind::Filesystem,
            "write_file",
            json!({"path": path, "content": content}),
        )],
        Check::FileHolds { path, content },
    )
}

fn read_and_answer(rng: &mut StdRng) -> Task {
    let path = format!("{}.txt", word(rng));
    let code = rng.random_range(1000..10_000_i64);
    let mut t = number_task(
        "read_and_answer",
        format!("The file `{path}` holds a code. Reply with the code, digits only."),
        call(
            ServerKind::Filesystem,
            "read_text_file",
            json!({"path": path}),
        ),
        code,
    );
    t.seeded.push(Seeded {
        path,
        content: format!("The code is {code}.\n"),
    });
    t
}

fn move_file(rng: &mut StdRng) -> Task {
    let from = format!("{}.txt", word(rng));
    let to = format!("{}.txt", word(rng));
    let content = format!("{} notes\n", pick(rng, &NOUNS));
    let mut t = task(
        "move_file",
        format!("Rename the file `{from}` to `{to}`."),
        vec![call(
            ServerKind::Filesystem,
            "move_file",
            json!({"source": from, "destination": to}),
        )],
        Check::FileMoved {
            from: from.clone(),
            to,
            content: content.clone(),
        },
    );
    t.seeded.push(Seeded {
        path: from,
        content,
    });
    t
}

fn make_directory_and_write(rng: &mut StdRng) -> Task {
    let dir = word(rng);
    let path = format!("{dir}/{}.md", pick(rng, &NOUNS));
    let content = format!("# {}", pick(rng, &ADJECTIVES));
    task(
        "make_directory_and_write",
        format!("Make the directory `{dir}` and write `{content}` into the file `{path}`."),
        vec![
            call(
                ServerKind::Filesystem,
                "create_directory",
                json!({"path": dir}),
            ),
            call(
                ServerKind::Filesystem,
                "write_file",
                json!({"path": path, "content": content}),
            ),
        ],
        Check::FileHolds { path, content },
    )
}

fn memory_relation(rng: &mut StdRng) -> Task {
    let person = pick(rng, &PEOPLE);
    let org = pick(rng, &ORGS);
    let relation = pick(rng, &RELATIONS);
    task(
        "memory_relation",
        format!(
            "In the memory graph, record the person {person} and the organization {org}, and \
             the relation `{relation}` from {person} to {org}."
        ),
        vec![
            call(
                ServerKind::Memory,
                "create_entities",
                json!({"entities": [
                    {"name": person, "entityType": "person", "observations": []},
                    {"name": org, "entityType": "organization", "observations": []},
                ]}),
            ),
            call(
                ServerKind::Memory,
                "create_relations",
                json!({"relations": [{"from": person, "to": org, "relationType": relation}]}),
            ),
        ],
        Check::MemoryRelation {
            from: person.into(),
            to: org.into(),
            relation: relation.into(),
        },
    )
}

fn memory_observation(rng: &mut StdRng) -> Task {
    let person = pick(rng, &PEOPLE);
    let observation = format!("likes {}", pick(rng, &NOUNS));
    task(
        "memory_observation",
        format!("Remember, in the memory graph, that the person {person} {observation}."),
        vec![call(
            ServerKind::Memory,
            "create_entities",
            json!({"entities": [
                {"name": person, "entityType": "person", "observations": [observation]},
            ]}),
        )],
        Check::MemoryObservation {
            entity: person.into(),
            observation,
        },
    )
}

fn git_commit(rng: &mut StdRng) -> Task {
    let file = format!("{}.txt", word(rng));
    let content = format!("{} {}\n", pick(rng, &ADJECTIVES), pick(rng, &NOUNS));
    let message = format!("Add {file}");
    task(
        "git_commit",
        format!(
            "In the git repository `repo`, add the file `{file}` containing `{}` and commit it \
             with the message `{message}`.",
            content.trim_end()
        ),
        vec![
            call(
                ServerKind::Filesystem,
                "write_file",
                json!({"path": format!("repo/{file}"), "content": content}),
            ),
            call(
                ServerKind::Git,
                "git_add",
                json!({"repo_path": "repo", "files": [file]}),
            ),
            call(
                ServerKind::Git,
                "git_commit",
                json!({"repo_path": "repo", "message": message}),
            ),
        ],
        Check::Committed {
            message,
            path: file,
            content,
        },
    )
}

fn git_branch(rng: &mut StdRng) -> Task {
    let name = format!("feature/{}", word(rng));
    task(
        "git_branch",
        format!("Create the branch `{name}` in the git repository `repo`."),
        vec![call(
            ServerKind::Git,
            "git_create_branch",
            json!({"repo_path": "repo", "branch_name": name}),
        )],
        Check::Branch { name },
    )
}

fn sum(rng: &mut StdRng) -> Task {
    let a = rng.random_range(100..100_000_i64);
    let b = rng.random_range(100..100_000_i64);
    number_task(
        "sum",
        format!("Use a tool to add {a} and {b}, then reply with the sum, digits only."),
        call(ServerKind::Everything, "get-sum", json!({"a": a, "b": b})),
        a + b,
    )
}

/// Whether every planned call names a live tool of its server and passes its live schema.
fn plan_fits(task: &Task, catalogue: &Catalogue) -> bool {
    task.plan.iter().all(|planned| {
        catalogue
            .iter()
            .find(|(kind, _)| *kind == planned.server)
            .is_some_and(|(_, tools)| {
                let call = lachesis_shared::tools::ToolCall {
                    name: planned.tool.clone(),
                    arguments: planned.arguments.clone(),
                };
                check_call(tools, &call).is_ok()
            })
    })
}

/// The task for `seed` among the templates the catalogue can serve (`None` when it serves none).
pub fn generate(seed: u64, catalogue: &Catalogue) -> Option<Task> {
    let mut rng = StdRng::seed_from_u64(seed);
    let pick = rng.random::<u64>();
    let fitting: Vec<Task> = TEMPLATES
        .iter()
        .chain(std::iter::once(&SUM))
        .map(|template| template(&mut StdRng::seed_from_u64(seed ^ 0x5eed)))
        .filter(|task| plan_fits(task, catalogue))
        .collect();
    if fitting.is_empty() {
        return None;
    }
    let index = usize::try_from(pick % fitting.len() as u64).unwrap_or(0);
    fitting.into_iter().nth(index)
}

/// The last integer in `text`, if any.
pub fn last_integer(text: &str) -> Option<i64> {
    let end = text.rfind(|c: char| c.is_ascii_digit())? + 1;
    let start = text[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    first_integer(&text[start.saturating_sub(1)..end])
}

/// The first integer in `text`, if any.
pub fn first_integer(text: &str) -> Option<i64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let negative = text[..start].ends_with('-');
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let value: i64 = digits.parse().ok()?;
    Some(if negative { -value } else { value })
}
