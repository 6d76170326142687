//! A real browser for the dashboard's tests: Debian's headless Chromium driven over
//! WebDriver by chromedriver (scripts/test installs both). Without them the tests fail
//! and say what to install; they never pass without a browser.

use fantoccini::{Client, ClientBuilder, Locator};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Browser {
    driver: Child,
    pub client: Client,
    _profile: tempfile::TempDir,
}

fn found(names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            names.iter().find_map(|n| {
                let out = Command::new("which").arg(n).output().ok()?;
                let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                (!path.is_empty()).then(|| PathBuf::from(path))
            })
        })
}

impl Browser {
    pub async fn start() -> Browser {
        let driver_bin = found(&["/usr/bin/chromedriver", "chromedriver"]).expect(
            "chromedriver is not installed: apt-get install chromium chromium-driver (scripts/test does)",
        );
        let chromium = found(&["/usr/bin/chromium", "chromium", "chromium-browser"]).expect(
            "chromium is not installed: apt-get install chromium chromium-driver (scripts/test does)",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", "--disable-quic", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let url = format!("http://127.0.0.1:{port}");
        let started = std::time::Instant::now();
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(30),
                        "chromedriver did not start a browser: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        Browser {
            driver,
            client,
            _profile: profile,
        }
    }

    /// Waits for `css` to match an element.
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
    }

    /// Waits until `script` (a JS expression) is true.
    pub async fn until(&self, script: &str) {
        let started = std::time::Instant::now();
        loop {
            let v = self
                .client
                .execute(&format!("return !!({script});"), vec![])
                .await
                .unwrap();
            if v == serde_json::Value::Bool(true) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "never true: {script}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a screenshot of the page as `target/dashboard-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
