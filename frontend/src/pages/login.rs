//! `/login`: sign in, register, or (on a fresh server) create the first owner and team.
//!
//! With authentication off there is nothing to sign in to, so the page sends the visitor on. The
//! server says whether anyone may register, only with an invite code, or nobody.

use lachesis_shared::accounts::{Login, NewAccount, Registration};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_navigate;

use crate::api;
use crate::app::Session;
use crate::live::Live;

/// Which form the page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    SignIn,
    Register,
    FirstOwner,
}

#[component]
pub fn LoginPage() -> impl IntoView {
    let session = expect_context::<Session>();
    let live = expect_context::<Live>();
    let navigate = use_navigate();
    let state = LocalResource::new(api::auth_state);
    let mode = RwSignal::new(Mode::SignIn);
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let team = RwSignal::new(String::new());
    let invite = RwSignal::new(String::new());
    let registration = RwSignal::new(Registration::Open);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);

    let go_home = navigate.clone();
    Effect::new(move |_| match state.get() {
        Some(Ok(s)) if !s.enabled => go_home("/", Default::default()),
        Some(Ok(s)) if s.needs_first_owner => mode.set(Mode::FirstOwner),
        Some(Ok(s)) => registration.set(s.registration),
        Some(Err(e)) => error.set(Some(e.to_string())),
        _ => {}
    });

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if busy.get_untracked() {
            return;
        }
        busy.set(true);
        error.set(None);
        let navigate = navigate.clone();
        let (user, pass) = (username.get_untracked(), password.get_untracked());
        let team_name = team.get_untracked().trim().to_owned();
        let invite_code = invite.get_untracked().trim().to_owned();
        let mode = mode.get_untracked();
        spawn_local(async move {
            let account = NewAccount {
                username: user.clone(),
                password: pass.clone(),
                team: (!team_name.is_empty()).then_some(team_name),
                invite: (!invite_code.is_empty()).then_some(invite_code),
            };
            let result = match mode {
                Mode::SignIn => {
                    api::login(&Login {
                        username: user,
                        password: pass,
                    })
                    .await
                }
                Mode::Register => api::register(&account).await,
                Mode::FirstOwner => api::setup(&account).await,
            };
            busy.set(false);
            match result {
                Ok(me) => {
                    session.signed_in(me);
                    // The socket was opened before the session cookie existed.
                    live.restart();
                    navigate("/", Default::default());
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };

    // Field test ids differ between the first-run form and the others, for the browser tests.
    let prefix = Signal::derive(move || match mode.get() {
        Mode::FirstOwner => "setup",
        _ => "login",
    });
    let heading = move || match mode.get() {
        Mode::SignIn => "Sign in",
        Mode::Register => "Create an account",
        Mode::FirstOwner => "Welcome: create the first owner",
    };
    let button = move || match mode.get() {
        Mode::SignIn => "Sign in",
        Mode::Register => "Create account",
        Mode::FirstOwner => "Create owner and team",
    };
    let team_field = move || {
        let (label, required) = match mode.get() {
            Mode::SignIn => return None,
            Mode::Register => ("Team to create (optional)", false),
            Mode::FirstOwner => ("Team", true),
        };
        Some(view! { <Field label name="team" required prefix value=team /> })
    };
    let invite_field = move || {
        (mode.get() == Mode::Register).then(|| {
            let required = registration.get() == Registration::Invite;
            let label = if required {
                "Invite code (from a team owner)"
            } else {
                "Invite code (optional)"
            };
            view! { <Field label name="invite" required prefix value=invite /> }
        })
    };
    let switch = move || {
        let (question, action, target) = match mode.get() {
            Mode::SignIn if registration.get() == Registration::Closed => return None,
            Mode::SignIn => ("No account? ", "Register", Mode::Register),
            Mode::Register => ("Have an account? ", "Sign in", Mode::SignIn),
            Mode::FirstOwner => return None,
        };
        Some(view! {
            <p class="muted">
                {question}
                <button type="button" class="link" on:click=move |_| mode.set(target)>
                    {action}
                </button>
            </p>
        })
    };
    let intro = move || {
        (mode.get() == Mode::FirstOwner).then(|| {
            view! {
                <p class="muted">
                    "No one has an account on this server yet. The first account owns the first team and can invite the others."
                </p>
            }
        })
    };

    view! {
        <section class="card narrow">
            <h1>{heading}</h1>
            {intro}
            <form class="stack" on:submit=submit>
                <Field
                    label="Username"
                    name="username"
                    autocomplete="username"
                    required=true
                    prefix
                    value=username
                />
                <Field
                    label="Password"
                    name="password"
                    kind="password"
                    autocomplete="current-password"
                    required=true
                    prefix
                    value=password
                />
                {team_field}
                {invite_field}
                <button
                    type="submit"
                    class="primary"
                    disabled=move || busy.get()
                    data-testid=move || format!("{}-submit", prefix.get())
                >
                    {button}
                </button>
            </form>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {switch}
        </section>
    }
}

/// A labelled input of the form, bound to `value`. Its test id, for the browser tests, is
/// `{prefix}-{name}`: the prefix follows the form's mode.
#[component]
fn Field(
    label: &'static str,
    name: &'static str,
    prefix: Signal<&'static str>,
    value: RwSignal<String>,
    #[prop(default = "text")] kind: &'static str,
    #[prop(optional)] autocomplete: Option<&'static str>,
    #[prop(optional)] required: bool,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <input
                type=kind
                autocomplete=autocomplete
                required=required
                data-testid=move || format!("{}-{name}", prefix.get())
                bind:value=value
            />
        </label>
    }
}
