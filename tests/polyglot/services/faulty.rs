//! Faulty service: /tests/faulty/rust/boom panics, /ok answers "ok". The
//! SDK must answer the panic with SERVICE_ERROR and keep serving.

use cumulo::{Answer, Api};

fn main() {
    let result = cumulo::run(|api: &mut Api| {
        api.subscribe("boom", |_, _| panic!("boom from rust"))?;
        api.subscribe("ok", |_, _| Ok(Answer::body("ok")))
    });
    if let Err(e) = result {
        eprintln!("faulty: {e}");
        std::process::exit(1);
    }
}
