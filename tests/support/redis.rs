//! A real `redis-server` for a test, on a free loopback port, stopped when
//! dropped (`.ci/run` installs Redis; `apt-get install redis-server`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A free loopback port. Another process may take it before Redis binds
/// it: [`spawn_on_free_port`] retries on another port when that happens.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// Whether `child` came to listen on `port`: the port answers while the
/// child is still alive a moment later (a `redis-server` that could not
/// bind exits at once, and the answer was then someone else's).
fn listening(child: &mut Child, port: u16) -> bool {
    for _ in 0..400 {
        if child.try_wait().expect("redis-server waits").is_some() {
            return false;
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            std::thread::sleep(Duration::from_millis(100));
            return child.try_wait().expect("redis-server waits").is_none();
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Starts `command(port)` on free ports until one is its own.
fn spawn_on_free_port(command: impl Fn(u16) -> Command) -> (Child, u16) {
    for _ in 0..20 {
        let port = free_port();
        let mut child = command(port)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (apt-get install redis-server)");
        if listening(&mut child, port) {
            return (child, port);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis-server found no free port in 20 tries");
}

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
        let (child, port) = spawn_on_free_port(|port| Self::command(port, dir.as_deref()));
        RedisServer {
            child: Some(child),
            port,
            dir,
        }
    }

    fn command(port: u16, dir: Option<&std::path::Path>) -> Command {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""]);
        match dir {
            Some(dir) => command.arg("--dir").arg(dir).args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ]),
            None => command.args(["--appendonly", "no"]),
        };
        command
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

    /// Starts it again on the same port (the clients know no other).
    pub fn resume(&mut self) {
        for _ in 0..20 {
            let mut child = Self::command(self.port, self.dir.as_deref())
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server runs (apt-get install redis-server)");
            if listening(&mut child, self.port) {
                self.child = Some(child);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server could not listen on {} again", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis Cluster of three masters on free loopback ports (no replicas),
/// stopped when dropped.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let (child, port) = spawn_on_free_port(|port| {
                let mut command = Command::new("redis-server");
                command
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args([
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--cluster-enabled",
                        "yes",
                    ])
                    .arg("--cluster-config-file")
                    .arg(dir.path().join(format!("nodes-{port}.conf")))
                    .arg("--dir")
                    .arg(dir.path());
                command
            });
            nodes.push(RedisServer {
                child: Some(child),
                port,
                dir: None,
            });
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(created.success(), "redis-cli --cluster create failed");
        let cluster = RedisCluster { nodes, _dir: dir };
        for _ in 0..400 {
            let ok = cluster.nodes.iter().all(|n| {
                Command::new("redis-cli")
                    .args(["-p", &n.port.to_string(), "cluster", "info"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
                    .unwrap_or(false)
            });
            if ok {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the cluster did not become ok");
    }

    /// `redis+cluster://` naming every node.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }
}

/// A `redis-server` answering only TLS, with a certificate for 127.0.0.1
/// from a CA of its own (`ca_pem`).
pub struct TlsRedisServer {
    _server: RedisServer,
    pub port: u16,
    pub ca_pem: String,
    _dir: tempfile::TempDir,
}

impl TlsRedisServer {
    pub fn start() -> TlsRedisServer {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().expect("a temp dir");
        let ca_key = KeyPair::generate().expect("a key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "redis test CA");
        let ca_pem = ca.self_signed(&ca_key).expect("a CA").pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("a key");
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("params")
            .signed_by(&key, &issuer)
            .expect("a certificate");
        let (cert_file, key_file, ca_file) = (
            dir.path().join("redis.crt"),
            dir.path().join("redis.key"),
            dir.path().join("ca.crt"),
        );
        std::fs::write(&cert_file, cert.pem()).expect("written");
        std::fs::write(&key_file, key.serialize_pem()).expect("written");
        std::fs::write(&ca_file, &ca_pem).expect("written");
        let (child, port) = spawn_on_free_port(|port| {
            let mut command = Command::new("redis-server");
            command
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                ])
                .args([
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(&cert_file)
                .arg("--tls-key-file")
                .arg(&key_file)
                .arg("--tls-ca-cert-file")
                .arg(&ca_file);
            command
        });
        TlsRedisServer {
            _server: RedisServer {
                child: Some(child),
                port,
                dir: None,
            },
            port,
            ca_pem,
            _dir: dir,
        }
    }
}
