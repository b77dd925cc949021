//! What the Pay-to-Play agent is shown: the cat task with its budget, and (when it chooses its
//! own judges) the card list with the strict JSON answer asked for.

use lachesis_inference::ChatMessage;
use lachesis_shared::cats::CatTask;
use lachesis_shared::ledger::MicroUsdc;

use crate::marketplace::panel::Market;

pub const ANSWER_PROMPT: &str = "You care for cats. A cat cannot talk: it shows behaviors. Say \
what the cat needs and what you do for it, in one or two sentences. Paid judges will score your \
answer.";

/// The task as the agent sees it.
pub fn task_text(task: &CatTask) -> String {
    let seen: Vec<String> = task
        .observed
        .iter()
        .map(|b| format!("- {}: {}", b.behavior, b.description))
        .collect();
    format!("The cat shows:\n{}", seen.join("\n"))
}

pub fn answer_messages(task: &CatTask, available: MicroUsdc) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", ANSWER_PROMPT),
        ChatMessage::new(
            "user",
            format!(
                "{}\n\nYour judging budget: {available} USDC.",
                task_text(task)
            ),
        ),
    ]
}

/// The selection question: each card with its price, specialties and what its past evaluations
/// were worth, and the JSON form of the answer.
pub fn selection_messages(
    task: &CatTask,
    market: &Market,
    panel: usize,
    available: MicroUsdc,
) -> Vec<ChatMessage> {
    let cards: Vec<String> = market
        .cards
        .iter()
        .zip(&market.arms)
        .map(|(card, arm)| {
            let record = if arm.pulls == 0 {
                "untried".to_string()
            } else {
                format!(
                    "{} evaluations, mean agreement {:.2}",
                    arm.pulls,
                    arm.mean_value()
                )
            };
            format!(
                "- {} ({}): {} USDC; {}; {record}",
                card.slug,
                card.name,
                MicroUsdc(card.price),
                card.specialties.join(", ")
            )
        })
        .collect();
    vec![
        ChatMessage::new(
            "system",
            "You choose which paid judges score your answers. Spend wisely: cheap judges that \
             agree with the panel are worth more per dollar. Answer with JSON only.",
        ),
        ChatMessage::new(
            "user",
            format!(
                "{}\n\nJudges:\n{}\n\nBudget left: {available} USDC. Choose 1 to {panel} judges \
                 whose total price fits the budget. Answer exactly \
                 {{\"selected_agent_cards\": [\"slug\", ...], \"reasoning\": \"...\"}}",
                task_text(task),
                cards.join("\n")
            ),
        ),
    ]
}
