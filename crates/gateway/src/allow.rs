//! 405 Method Not Allowed: a request whose name (`path/method`) no service
//! subscribes, while the same path is subscribed for another method. Looked
//! up only after NO_SERVICE, so a served request costs nothing more.

use cumulo_service::ServiceApi;

/// The methods probed, as `Allow` names them and as the name ends. A
/// method outside the list (`PURGE`) is never offered in `Allow`.
const METHODS: [(&str, &str); 7] = [
    ("GET", "get"),
    ("HEAD", "head"),
    ("POST", "post"),
    ("PUT", "put"),
    ("DELETE", "delete"),
    ("PATCH", "patch"),
    ("OPTIONS", "options"),
];

/// The `Allow` value for a request sent to `name` (`path/method`, as
/// `method_suffix = true` makes it): the other methods its path is served
/// for; `None` when there is none (the answer stays 404).
pub fn allowed<A: ServiceApi>(api: &A, name: &str) -> Option<String> {
    let (path, method) = name.rsplit_once('/')?;
    let mut probe = String::with_capacity(path.len() + 8);
    let mut allow: Vec<&str> = Vec::new();
    for (upper, lower) in METHODS {
        if lower == method {
            continue;
        }
        probe.clear();
        probe.push_str(path);
        probe.push('/');
        probe.push_str(lower);
        if api.is_served(&probe) {
            allow.push(upper);
        }
    }
    (!allow.is_empty()).then(|| allow.join(", "))
}
