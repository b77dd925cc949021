//! `/settings`: the teams you belong to; for owners, each team's members and API tokens; and a
//! form to create a team.

use lachesis_shared::accounts::{
    CreatedInvite, CreatedToken, Member, Membership, NewTeam, NewToken, Role,
};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::app::Session;
use crate::format::{ago, now_ms};
use crate::table::DataTable;

#[component]
pub fn SettingsPage() -> impl IntoView {
    let session = expect_context::<Session>();

    let body = move || {
        let Some(me) = session.me.get() else {
            return view! { <p class="muted">"Loading…"</p> }.into_any();
        };
        if !me.auth_enabled {
            return view! {
                <p class="card muted">
                    "Authentication is off on this server (the loopback default): everyone acts with full rights, so there are no teams or tokens to manage. Start the server with authentication on to use them."
                </p>
            }
            .into_any();
        }
        let teams = me
            .teams
            .into_iter()
            .map(|membership| view! { <TeamCard membership /> })
            .collect_view();
        view! {
            {me.user.map(|u| view! { <p class="muted">"Signed in as " <strong>{u.username}</strong></p> })}
            {teams}
            <NewTeamForm />
        }
        .into_any()
    };

    view! {
        <h1>"Settings"</h1>
        {body}
    }
}

#[component]
fn NewTeamForm() -> impl IntoView {
    let session = expect_context::<Session>();
    let name = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let team = NewTeam {
            name: name.get_untracked().trim().to_owned(),
        };
        spawn_local(async move {
            match api::create_team(&team).await {
                Ok(_) => {
                    name.set(String::new());
                    error.set(None);
                    session.refresh().await;
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    view! {
        <section class="card">
            <h2>"Create a team"</h2>
            <form class="inline" on:submit=submit>
                <input type="text" placeholder="team name" required bind:value=name />
                <button type="submit" class="primary">"Create"</button>
            </form>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </section>
    }
}

#[component]
fn TeamCard(membership: Membership) -> impl IntoView {
    let owner = membership.role == Role::Owner;
    let team = membership.team.clone();
    view! {
        <section class="card">
            <h2>
                {membership.team.clone()}
                <span class="badge">{membership.role.as_str()}</span>
            </h2>
            {owner
                .then(|| {
                    view! {
                        <Members team=team.clone() />
                        <Invites team=team.clone() />
                        <Tokens team=team.clone() />
                    }
                })}
        </section>
    }
}

/// Owners hand out single-use sign-up codes; on an invite-only server they are the only way in.
#[component]
fn Invites(team: String) -> impl IntoView {
    let team = StoredValue::new(team);
    let created = RwSignal::new(None::<CreatedInvite>);
    let error = RwSignal::new(None::<String>);
    let create = move |_| {
        spawn_local(async move {
            match api::create_invite(&team.get_value()).await {
                Ok(invite) => {
                    error.set(None);
                    created.set(Some(invite));
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    let shown = move || {
        created.get().map(|invite| {
            let days = ((invite.expires_at_ms - now_ms()) as f64 / 86_400_000.0).round();
            view! {
                <p>
                    "Invite code (shown once, single use, valid " {days} " days): "
                    <code data-testid="invite-code">{invite.code}</code>
                </p>
            }
        })
    };
    view! {
        <h3>"Invites"</h3>
        <button type="button" data-testid="create-invite" on:click=create>
            "Create an invite code"
        </button>
        {shown}
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

#[component]
fn Members(team: String) -> impl IntoView {
    let team = StoredValue::new(team);
    let members = LocalResource::new(move || async move { api::members(&team.get_value()).await });
    let username = RwSignal::new(String::new());
    let role = RwSignal::new("member".to_owned());
    let error = RwSignal::new(None::<String>);

    let add = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let member = Member {
            username: username.get_untracked().trim().to_owned(),
            role: Role::parse(&role.get_untracked()).unwrap_or(Role::Member),
        };
        spawn_local(async move {
            match api::set_member(&team.get_value(), &member).await {
                Ok(_) => {
                    username.set(String::new());
                    error.set(None);
                    members.refetch();
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    let remove = move |name: String| {
        spawn_local(async move {
            match api::remove_member(&team.get_value(), &name).await {
                Ok(()) => members.refetch(),
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };

    let rows = move || match members.get() {
        None => view! { <li class="muted">"Loading…"</li> }.into_any(),
        Some(Err(e)) => view! { <li class="error">{e.to_string()}</li> }.into_any(),
        Some(Ok(list)) => list
            .into_iter()
            .map(|m| {
                let name = m.username.clone();
                view! {
                    <li>
                        <span>{m.username}</span>
                        <span class="badge">{m.role.as_str()}</span>
                        <button class="link danger" on:click=move |_| remove(name.clone())>
                            "Remove"
                        </button>
                    </li>
                }
            })
            .collect_view()
            .into_any(),
    };

    view! {
        <h3>"Members"</h3>
        <ul class="plain">{rows}</ul>
        <form class="inline" on:submit=add>
            <input type="text" placeholder="username" required bind:value=username />
            <select bind:value=role aria-label="Role">
                <option value="viewer">"viewer"</option>
                <option value="member">"member"</option>
                <option value="owner">"owner"</option>
            </select>
            <button type="submit">"Add or change"</button>
        </form>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

#[component]
fn Tokens(team: String) -> impl IntoView {
    let team = StoredValue::new(team);
    let tokens = LocalResource::new(move || async move { api::tokens(&team.get_value()).await });
    let name = RwSignal::new(String::new());
    let run = RwSignal::new(String::new());
    let read_only = RwSignal::new(false);
    let inference = RwSignal::new(false);
    let expires_in_days = RwSignal::new(String::new());
    let created = RwSignal::new(None::<CreatedToken>);
    let copied = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);

    let create = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let run_name = run.get_untracked().trim().to_owned();
        let days = expires_in_days.get_untracked();
        let days = days.trim();
        let expires = if days.is_empty() {
            None
        } else {
            match days.parse::<u32>() {
                Ok(days) => Some(days),
                Err(_) => {
                    error.set(Some("expiry: a whole number of days, or empty".to_owned()));
                    return;
                }
            }
        };
        let body = NewToken {
            name: name.get_untracked().trim().to_owned(),
            run: (!run_name.is_empty()).then_some(run_name),
            read_only: read_only.get_untracked(),
            expires_in_days: expires,
            inference: inference.get_untracked(),
        };
        spawn_local(async move {
            match api::create_token(&team.get_value(), &body).await {
                Ok(token) => {
                    created.set(Some(token));
                    copied.set(false);
                    name.set(String::new());
                    run.set(String::new());
                    read_only.set(false);
                    inference.set(false);
                    expires_in_days.set(String::new());
                    error.set(None);
                    tokens.refetch();
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    let revoke = move |id: i64| {
        spawn_local(async move {
            match api::revoke_token(&team.get_value(), id).await {
                Ok(()) => tokens.refetch(),
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    let copy = move |_| {
        if let Some(token) = created.get_untracked() {
            let clipboard = window().navigator().clipboard();
            let _ = clipboard.write_text(&token.token);
            copied.set(true);
        }
    };

    let secret = move || {
        created.get().map(|token| {
            view! {
                <div class="secret" role="status">
                    <p>
                        <strong>"Copy this token now."</strong>
                        " It is shown once: the server keeps only a hash of it."
                    </p>
                    <div class="inline">
                        <code data-testid="token-secret">{token.token.clone()}</code>
                        <button type="button" on:click=copy>
                            {move || if copied.get() { "Copied" } else { "Copy" }}
                        </button>
                        <button type="button" class="link" on:click=move |_| created.set(None)>
                            "Done"
                        </button>
                    </div>
                </div>
            }
        })
    };

    let rows = move || match tokens.get() {
        None => view! { <tr><td colspan="7" class="muted">"Loading…"</td></tr> }.into_any(),
        Some(Err(e)) => {
            view! { <tr><td colspan="7" class="error">{e.to_string()}</td></tr> }.into_any()
        }
        Some(Ok(list)) => {
            let now = now_ms();
            list.into_iter()
                .map(|t| {
                    let id = t.id;
                    view! {
                        <tr>
                            <td>{t.name}</td>
                            <td>{t.run.unwrap_or_else(|| "all runs".to_owned())}</td>
                            <td>
                                {if t.read_only { "read-only" } else { "read-write" }}
                                {if t.inference { ", model" } else { "" }}
                            </td>
                            <td>{ago(now, t.created_at_ms)}</td>
                            <td>{t.last_used_at_ms.map_or_else(|| "never".to_owned(), |at| ago(now, at))}</td>
                            <td>{expiry(now, t.expires_at_ms)}</td>
                            <td>
                                <button class="link danger" on:click=move |_| revoke(id)>"Revoke"</button>
                            </td>
                        </tr>
                    }
                })
                .collect_view()
                .into_any()
        }
    };

    view! {
        <h3>"API tokens"</h3>
        <p class="muted">
            "Trainers and environments send a token as " <code>"Authorization: Bearer …"</code>
            ". A token limited to one run also addresses that run on Atropos's plain paths."
        </p>
        {secret}
        <DataTable rows>
            <th>"Name"</th>
            <th>"Run"</th>
            <th>"Access"</th>
            <th>"Created"</th>
            <th>"Last used"</th>
            <th>"Expires"</th>
            <th></th>
        </DataTable>
        <form class="inline" on:submit=create>
            <input type="text" placeholder="token name" required bind:value=name />
            <input type="text" placeholder="run (optional)" bind:value=run />
            <label class="check">
                <input type="checkbox" bind:checked=read_only />
                "read-only"
            </label>
            <label class="check">
                <input type="checkbox" bind:checked=inference />
                "may call the model"
            </label>
            <input
                type="number"
                min="1"
                placeholder="expires in days (optional)"
                bind:value=expires_in_days
            />
            <button type="submit" class="primary">"Create token"</button>
        </form>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
    }
}

/// When a token stops working: "never", "expired", or how long it has left.
fn expiry(now_ms: i64, expires_at_ms: Option<i64>) -> String {
    const HOUR_MS: i64 = 3_600_000;
    match expires_at_ms {
        None => "never".to_owned(),
        Some(at) if at <= now_ms => "expired".to_owned(),
        Some(at) if at - now_ms >= 24 * HOUR_MS => {
            format!("in {} d", (at - now_ms) / (24 * HOUR_MS))
        }
        Some(at) => format!("in {} h", ((at - now_ms) / HOUR_MS).max(1)),
    }
}
