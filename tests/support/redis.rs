//! A real `redis-server` for a test, on a free loopback port, stopped when
//! dropped (`.ci/run` installs Redis; `apt-get install redis-server`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    /// Where it keeps an append-only file, if it does.
    dir: Option<std::path::PathBuf>,
}

impl RedisServer {
    /// A fresh server that keeps nothing on disk.
    pub fn start() -> RedisServer {
        Self::start_with(None)
    }

    /// A fresh server keeping every write in an append-only file in `dir`,
    /// synced before it is acknowledged (`appendfsync always`): what
    /// `deploy/` ships.
    pub fn start_persistent(dir: &std::path::Path) -> RedisServer {
        Self::start_with(Some(dir.to_owned()))
    }

    fn start_with(dir: Option<std::path::PathBuf>) -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a free port")
            .local_addr()
            .expect("its address")
            .port();
        let mut server = RedisServer {
            child: None,
            port,
            dir,
        };
        server.resume();
        server
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server (its data goes with it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn resume(&mut self) {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""]);
        match &self.dir {
            Some(dir) => command.arg("--dir").arg(dir).args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ]),
            None => command.args(["--appendonly", "no"]),
        };
        let child = command
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (apt-get install redis-server)");
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server did not listen on {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
