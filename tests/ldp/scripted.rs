//! A delegate the test scripts: the reference crate's echo delegate for
//! every message but TASK_SUBMIT, which it holds until the test says how
//! to answer it (so a TASK_CANCEL or a SESSION_CLOSE can arrive while dgw
//! waits on the delegate).

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldp_protocol::types::error::LdpError;
use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
use ldp_protocol::types::payload::PayloadMode;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{ECHO, SECRET};

/// How the delegate answers a held TASK_SUBMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// TASK_RESULT (the delegate did the work).
    Result,
    /// TASK_FAILED.
    Failed,
    /// TASK_UPDATE (the task stays open at the delegate).
    Update,
    /// Hostile: the TASK_RESULT of another task.
    Stray,
}

/// The scripted delegate.
#[derive(Clone)]
pub struct Scripted {
    pub url: String,
    held: Arc<Mutex<HashMap<String, oneshot::Sender<Answer>>>>,
    /// TASK_RESULTs it answered: the work it did.
    pub results: Arc<AtomicUsize>,
    /// Hostile: answer a TASK_CANCEL with the task's result.
    pub cancel_with_result: Arc<AtomicBool>,
}

/// How long a held task waits for the test before it fails on its own.
const HOLD: Duration = Duration::from_secs(20);

impl Scripted {
    /// Listens on a free loopback port in `rt`.
    pub fn start(rt: &tokio::runtime::Runtime) -> Scripted {
        use http_body_util::{BodyExt, Full};
        use hyper::body::{Bytes, Incoming};
        use hyper::{Request, Response};
        let echo = Arc::new(
            ldp_protocol::LdpServer::echo_server(ECHO, "Echo").with_signing_secret(SECRET),
        );
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let me = Scripted {
            url: format!("http://{}", listener.local_addr().unwrap()),
            held: Arc::default(),
            results: Arc::default(),
            cancel_with_result: Arc::default(),
        };
        let this = me.clone();
        rt.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (echo, this) = (echo.clone(), this.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (echo, this) = (echo.clone(), this.clone());
                        async move {
                            let path = req.uri().path().to_owned();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let answer = match path.as_str() {
                                "/ldp/identity" => Ok(echo.handle_identity_request()),
                                _ => this.message(&echo, &body).await,
                            };
                            let response = match answer {
                                Ok(v) => Response::new(Full::new(Bytes::from(v.to_string()))),
                                Err(e) => Response::builder()
                                    .status(400)
                                    .body(Full::new(Bytes::from(e)))
                                    .unwrap(),
                            };
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        me
    }

    async fn message(&self, echo: &ldp_protocol::LdpServer, body: &[u8]) -> Result<Value, String> {
        let envelope: LdpEnvelope = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let answer = match &envelope.body {
            LdpMessageBody::TaskSubmit { task_id, .. } => {
                let (tx, rx) = oneshot::channel();
                self.held.lock().unwrap().insert(task_id.clone(), tx);
                let how = tokio::time::timeout(HOLD, rx)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or(Answer::Failed);
                self.answer_task(echo, &envelope, task_id, how).await?
            }
            LdpMessageBody::TaskCancel { task_id }
                if self.cancel_with_result.load(Ordering::SeqCst) =>
            {
                let mut submit = envelope.clone();
                submit.body = LdpMessageBody::TaskSubmit {
                    task_id: task_id.clone(),
                    skill: "echo".into(),
                    input: Value::Null,
                    contract: None,
                };
                ldp_protocol::apply_signature(&mut submit, SECRET);
                self.answer_task(echo, &submit, task_id, Answer::Result)
                    .await?
            }
            _ => echo.handle_message(envelope).await?,
        };
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }

    async fn answer_task(
        &self,
        echo: &ldp_protocol::LdpServer,
        envelope: &LdpEnvelope,
        task_id: &str,
        how: Answer,
    ) -> Result<LdpEnvelope, String> {
        let body = match how {
            Answer::Result => {
                self.results.fetch_add(1, Ordering::SeqCst);
                return echo.handle_message(envelope.clone()).await;
            }
            Answer::Stray => {
                let mut other = envelope.clone();
                other.body = LdpMessageBody::TaskSubmit {
                    task_id: format!("{task_id}-other"),
                    skill: "echo".into(),
                    input: Value::Null,
                    contract: None,
                };
                ldp_protocol::apply_signature(&mut other, SECRET);
                return echo.handle_message(other).await;
            }
            Answer::Failed => LdpMessageBody::TaskFailed {
                task_id: task_id.into(),
                error: LdpError::runtime("SCRIPTED", "the script failed it"),
            },
            Answer::Update => LdpMessageBody::TaskUpdate {
                task_id: task_id.into(),
                progress: Some(0.5),
                message: Some("working".into()),
            },
        };
        let mut e = LdpEnvelope::new(
            &envelope.session_id,
            ECHO,
            &envelope.from,
            body,
            PayloadMode::Text,
        );
        ldp_protocol::apply_signature(&mut e, SECRET);
        Ok(e)
    }

    /// Whether the delegate holds `task` (dgw forwarded it and waits).
    pub fn holds(&self, task: &str) -> bool {
        self.held.lock().unwrap().contains_key(task)
    }

    /// Answers the held `task` `how`; false if it holds no such task.
    pub fn answer(&self, task: &str, how: Answer) -> bool {
        match self.held.lock().unwrap().remove(task) {
            Some(tx) => tx.send(how).is_ok(),
            None => false,
        }
    }

    /// Waits until `task` is held or `done` says the router's request
    /// ended without it (dgw answered itself); true if it is held.
    pub fn wait_held(&self, task: &str, done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.holds(task) {
                return true;
            }
            if done() {
                return self.holds(task);
            }
            assert!(
                Instant::now() < deadline,
                "task {task} neither reached the delegate nor ended within 10 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
