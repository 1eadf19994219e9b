//! The core's own log: plain text when stderr is a file or a pipe (ANSI
//! colour only on a terminal, never with NO_COLOR).

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ESC: u8 = 0x1b;

#[test]
fn a_log_written_to_a_pipe_has_no_colour_codes() {
    let dir = std::env::temp_dir().join(format!("cumulo-e2e-logs-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // An error before anything starts: logged at once, and the core exits.
    let out = Command::new(CUMULO)
        .args(["run", "--config"])
        .arg(dir.join("missing.toml"))
        .env_remove("CUMULO_LOG")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ERROR"), "{err}");
    assert!(!out.stderr.contains(&ESC), "escape codes in a piped log: {err:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_written_to_a_file_has_no_colour_codes() {
    for format in ["text", "json"] {
        let dir = std::env::temp_dir().join(format!("cumulo-e2e-logs-file-{format}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("cumulo.toml");
        std::fs::write(
            &config,
            format!("[core]\nsocket = \"{}\"\n\n[admin]\nport = 0\n", dir.join("s.sock").display()),
        )
        .unwrap();
        let log = dir.join("core.log");
        let mut child = Command::new(CUMULO)
            .args(["--log-format", format, "run", "--config"])
            .arg(&config)
            .env_remove("CUMULO_LOG")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // The start is logged at info level, up to "ready".
        let end = Instant::now() + Duration::from_secs(15);
        let text = loop {
            let text = std::fs::read(&log).unwrap();
            if String::from_utf8_lossy(&text).contains("ready") || Instant::now() > end {
                break text;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = child.kill();
        let _ = child.wait();
        let shown = String::from_utf8_lossy(&text).to_string();
        assert!(shown.contains("INFO"), "{format}: the core logged nothing at info: {shown}");
        assert!(!text.contains(&ESC), "{format}: escape codes in the log file: {shown:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
