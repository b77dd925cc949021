//! `/environments`: the environments built into this server.

use leptos::prelude::*;

use crate::api;

#[component]
pub fn EnvironmentsPage() -> impl IntoView {
    let envs = LocalResource::new(api::environments);
    let body = move || match envs.get() {
        None => view! { <p class="muted">"Loading…"</p> }.into_any(),
        Some(Err(e)) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
        Some(Ok(list)) if list.is_empty() => {
            view! { <p class="muted">"This server has no built-in environments."</p> }.into_any()
        }
        Some(Ok(list)) => view! {
            <ul class="env-list">
                {list
                    .into_iter()
                    .map(|env| {
                        view! {
                            <li class="card">
                                <h3>{env.name}</h3>
                                <p>{env.description}</p>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
        .into_any(),
    };
    view! {
        <h1>"Environments"</h1>
        <p class="muted">
            "Built-in environments run in-process ("
            <code>"lachesis serve --env NAME"</code>
            ") or as workers on other machines ("
            <code>"lachesis env serve NAME --api URL"</code>
            "). Unmodified atroposlib environments connect over the Atropos API."
        </p>
        {body}
    }
}
