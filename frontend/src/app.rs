//! The app shell: the session, the live socket, the router and the navigation bar.

use lachesis_shared::accounts::{Me, Role};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::{use_location, use_navigate};
use leptos_router::path;

use crate::api::{self, ApiError};
use crate::live::{Live, LiveIndicator, provide_live};
use crate::pages::arena::{ArenaPage, BattlePage, LeaderboardPage};
use crate::pages::cats::CatsPage;
use crate::pages::chess::{ChessPage, GamePage};
use crate::pages::dashboard::{ComparePage, DashboardPage};
use crate::pages::environments::EnvironmentsPage;
use crate::pages::feedback::{QueuePage, QueuesPage};
use crate::pages::login::LoginPage;
use crate::pages::marketplace::MarketplacePage;
use crate::pages::protein::ProteinPage;
use crate::pages::runs::RunsPage;
use crate::pages::settings::SettingsPage;
use crate::pages::spatial::{SpatialBenchPage, SpatialLivePage, SpatialSolvePage};
use crate::pages::tools::ToolsPage;

/// Who is signed in, shared by every page through context.
#[derive(Clone, Copy)]
pub struct Session {
    /// `None` until `/api/me` answers, and while signed out.
    pub me: RwSignal<Option<Me>>,
    /// Whether the server asks for sign-in at all (`None` until known).
    pub auth_enabled: RwSignal<Option<bool>>,
}

impl Session {
    pub fn signed_in(&self, me: Me) {
        api::set_csrf(me.csrf_token.clone());
        self.auth_enabled.set(Some(me.auth_enabled));
        self.me.set(Some(me));
    }

    pub fn signed_out(&self) {
        api::set_csrf(None);
        self.me.set(None);
    }

    /// Reloads `/api/me`, e.g. after joining a team.
    pub async fn refresh(&self) {
        match api::me().await {
            Ok(me) => self.signed_in(me),
            Err(ApiError::Unauthorized(_)) => {
                self.auth_enabled.set(Some(true));
                self.signed_out();
            }
            Err(_) => {}
        }
    }

    /// The signed-in user's role in `team`; every right when authentication is off.
    pub fn role_in(&self, team: Option<&str>) -> Option<Role> {
        self.me.with(|me| {
            let me = me.as_ref()?;
            if !me.auth_enabled {
                return Some(Role::Owner);
            }
            let team = team?;
            me.teams.iter().find(|m| m.team == team).map(|m| m.role)
        })
    }
}

#[component]
pub fn App() -> impl IntoView {
    let session = Session {
        me: RwSignal::new(None),
        auth_enabled: RwSignal::new(None),
    };
    provide_context(session);
    provide_live();
    // `/api/me` answers 401 to visitors when sign-in is on: that is not an error here (public
    // runs stay readable), so it does not go through the redirecting 401 hook.
    spawn_local(async move { session.refresh().await });

    view! {
        <Router>
            <Shell />
        </Router>
    }
}

/// Everything inside the router (the hooks below need it).
#[component]
fn Shell() -> impl IntoView {
    let navigate = use_navigate();
    let location = use_location();
    api::on_unauthorized(move || {
        let path = location.pathname.get_untracked();
        if path != "/login" {
            navigate("/login", Default::default());
        }
    });

    view! {
        <Nav />
        <main>
            <Routes fallback=|| view! { <p class="card">"No such page."</p> }>
                <Route path=path!("/") view=RunsPage />
                <Route path=path!("/runs") view=RunsPage />
                <Route path=path!("/runs/:run") view=DashboardPage />
                <Route path=path!("/compare") view=ComparePage />
                <Route path=path!("/environments") view=EnvironmentsPage />
                <Route path=path!("/chess") view=ChessPage />
                <Route path=path!("/chess/:game") view=GamePage />
                <Route path=path!("/marketplace") view=MarketplacePage />
                <Route path=path!("/cats") view=CatsPage />
                <Route path=path!("/tools") view=ToolsPage />
                <Route path=path!("/protein") view=ProteinPage />
                <Route path=path!("/arena") view=ArenaPage />
                <Route path=path!("/arena/leaderboard") view=LeaderboardPage />
                <Route path=path!("/arena/battles/:id") view=BattlePage />
                <Route path=path!("/feedback") view=QueuesPage />
                <Route path=path!("/feedback/:id") view=QueuePage />
                <Route path=path!("/settings") view=SettingsPage />
                <Route path=path!("/spatial") view=SpatialLivePage />
                <Route path=path!("/spatial/solve") view=SpatialSolvePage />
                <Route path=path!("/spatial/bench") view=SpatialBenchPage />
                <Route path=path!("/login") view=LoginPage />
            </Routes>
        </main>
    }
}

#[component]
fn Nav() -> impl IntoView {
    let session = expect_context::<Session>();
    let live = expect_context::<Live>();
    let navigate = use_navigate();

    let sign_out = move |_| {
        let navigate = navigate.clone();
        spawn_local(async move {
            // Signed out locally even if the server could not be told: the cookie is HttpOnly,
            // so the next request will show whether the session survived.
            let _ = api::logout().await;
            session.signed_out();
            live.restart();
            navigate("/login", Default::default());
        });
    };

    let user = move || {
        let enabled = session.auth_enabled.get() == Some(true);
        let name = session.me.with(|me| {
            me.as_ref()
                .and_then(|m| m.user.as_ref().map(|u| u.username.clone()))
        });
        match (enabled, name) {
            (true, Some(name)) => view! {
                <span class="user" data-testid="nav-user">{name}</span>
                <button class="link" on:click=sign_out.clone()>"Sign out"</button>
            }
            .into_any(),
            (true, None) => view! { <A href="/login">"Sign in"</A> }.into_any(),
            (false, _) => ().into_any(),
        }
    };

    view! {
        <nav class="top">
            <A href="/" exact=true>
                <span class="brand">"Lachesis"</span>
            </A>
            <A href="/runs">"Runs"</A>
            <A href="/environments">"Environments"</A>
            <A href="/chess">"Chess"</A>
            <A href="/spatial">"Spatial"</A>
            <A href="/marketplace">"Marketplace"</A>
            <A href="/cats">"Cats"</A>
            <A href="/tools">"Tools"</A>
            <A href="/protein">"Protein"</A>
            <A href="/arena">"Arena"</A>
            <A href="/feedback">"Feedback"</A>
            <A href="/settings">"Settings"</A>
            <span class="spacer"></span>
            <LiveIndicator />
            {user}
        </nav>
    }
}
