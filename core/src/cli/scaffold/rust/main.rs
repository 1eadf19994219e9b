//! {{name}}: a cumulo service. Subscribes `{{name}}/get` under its prefix and
//! answers "hello from {{name}}", with the request's `value` parameter when it
//! has one. Runs CUMULO_THREAD_COUNT instances, one per thread.

use cumulo::{info, Answer, Api};

const TEXT: &[u8] = b"content-type\0text/plain; charset=utf-8\0";

fn main() {
    let result = cumulo::run(|api: &mut Api| {
        api.subscribe("{{name}}/get", |_api, req| {
            let body = match info::get(req.request, b"value") {
                Some(value) => format!("hello from {{name}} (value {})", String::from_utf8_lossy(value)),
                None => "hello from {{name}}".to_string(),
            };
            Ok(Answer::with_info(TEXT, body))
        })
    });
    if let Err(e) = result {
        eprintln!("{{name}}: {e}");
        std::process::exit(1);
    }
}
