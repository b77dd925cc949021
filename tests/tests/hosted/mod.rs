//! The real server with accounts on, as the hostile account tests drive it.

use std::sync::Arc;

use lachesis::auth::policy::{AccountArgs, AccountPolicy};
use lachesis_tests::{config_for, fresh_database};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

pub const PASSWORD: &str = "a long enough password";

/// The real server with accounts on, plus what the tests inspect behind it: its database and its
/// account policy (whose argon2 gate counts every hash and verification).
pub struct Hosted {
    pub base: String,
    pub client: reqwest::Client,
    pub db: PgPool,
    pub accounts: Arc<AccountPolicy>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A signed-in browser: the cookie as sent back (`name=secret`) and the CSRF token.
pub struct Session {
    pub cookie: String,
    pub csrf: String,
}

impl Hosted {
    pub async fn start(args: AccountArgs) -> Self {
        let mut config = config_for(&fresh_database().await);
        config.auth = true;
        config.accounts = AccountPolicy::resolve(&args).expect("a valid account policy");
        let server = lachesis::app::Server::build(&config)
            .await
            .expect("build the server");
        let base = format!("http://{}", server.local_addr());
        let accounts = server.state.accounts.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run_until(async move {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: lachesis_tests::client(),
            db: PgPool::connect(&config.database_url).await.unwrap(),
            accounts,
            _stop: stop,
        }
    }

    pub async fn open() -> Self {
        Self::start(AccountArgs::default()).await
    }

    /// A request with an optional session (its CSRF header included) or bearer token.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        who: Option<&Session>,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(session) = who {
            request = request
                .header("cookie", &session.cookie)
                .header("x-csrf-token", &session.csrf);
        }
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Signs up through `path` and returns the session; panics unless it succeeds.
    pub async fn sign_up(&self, path: &str, body: Value) -> (Session, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let set_cookie = response
            .headers()
            .get("set-cookie")
            .map(|v| v.to_str().unwrap().to_string());
        let me: Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{me}");
        let set_cookie = set_cookie.expect("a session cookie");
        let session = Session {
            cookie: set_cookie.split(';').next().unwrap().to_string(),
            csrf: me["csrf_token"].as_str().unwrap().to_string(),
        };
        (session, me)
    }

    pub async fn first_owner(&self) -> Session {
        let body = json!({"username": "ada", "password": PASSWORD, "team": "lab"});
        self.sign_up("/api/auth/setup", body).await.0
    }

    pub async fn users(&self) -> i64 {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM users")
            .fetch_one(&self.db)
            .await
            .unwrap();
        n
    }

    pub async fn new_token(&self, owner: &Session, body: Value) -> (String, Value) {
        let (status, created) = self
            .call(
                Method::POST,
                "/api/teams/lab/tokens",
                Some(owner),
                None,
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{created}");
        (
            created["token"].as_str().unwrap().to_string(),
            created["info"].clone(),
        )
    }
}

pub fn account(username: &str) -> Value {
    json!({"username": username, "password": PASSWORD})
}
