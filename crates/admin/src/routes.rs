//! The admin API's routes: one table, used both to dispatch requests and by
//! the test that checks the OpenAPI document (docs/admin-openapi.json)
//! against what the server really answers.

use cumulo_config::Role;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    ListServices,
    AddServices,
    GetService,
    UpdateService,
    RemoveService,
    RestartService,
    Subscriptions,
    Nodes,
    GetLogLevel,
    SetLogLevel,
    Status,
    OpenApi,
    Metrics,
    WebSockets,
    CloseWebSocket,
    Stats,
    Logs,
    Reports,
    Queues,
    QueueDeadLetters,
    QueueReplay,
    QueuePurge,
    HttpClients,
    Cron,
    Dashboard,
    DashboardScript,
    DashboardStyle,
    WhoAmI,
    Reload,
    Resiliency,
    SetPolicies,
    ResetBreakers,
}

impl Route {
    /// Served without the token: the dashboard's page and assets, which
    /// hold no data (every call the page makes carries the token).
    pub fn is_public(self) -> bool {
        matches!(self, Route::Dashboard | Route::DashboardScript | Route::DashboardStyle)
    }

    /// The role a token needs for this call: `operate` for every call that
    /// changes something (a new route must be placed here to compile).
    pub fn needs(self) -> Role {
        use Route::*;
        match self {
            AddServices | UpdateService | RemoveService | RestartService | SetLogLevel | CloseWebSocket
            | QueueReplay | QueuePurge | Reload | SetPolicies | ResetBreakers => Role::Operate,
            ListServices | GetService | Subscriptions | Nodes | GetLogLevel | Status | OpenApi | Metrics
            | WebSockets | Stats | Logs | Reports | Queues | QueueDeadLetters | HttpClients | Cron | Dashboard
            | DashboardScript | DashboardStyle | WhoAmI | Resiliency => Role::Read,
        }
    }
}

/// Method, path template (`{id}` is one path segment), route.
pub const ROUTES: &[(&str, &str, Route)] = &[
    ("GET", "/v1/services", Route::ListServices),
    ("POST", "/v1/services", Route::AddServices),
    ("GET", "/v1/services/{id}", Route::GetService),
    ("PATCH", "/v1/services/{id}", Route::UpdateService),
    ("DELETE", "/v1/services/{id}", Route::RemoveService),
    ("POST", "/v1/services/{id}/restart", Route::RestartService),
    ("GET", "/v1/subscriptions", Route::Subscriptions),
    ("GET", "/v1/nodes", Route::Nodes),
    ("GET", "/v1/log-level", Route::GetLogLevel),
    ("PUT", "/v1/log-level", Route::SetLogLevel),
    ("GET", "/v1/status", Route::Status),
    ("GET", "/v1/openapi.json", Route::OpenApi),
    ("GET", "/metrics", Route::Metrics),
    ("GET", "/v1/websockets", Route::WebSockets),
    ("DELETE", "/v1/websockets/{id}", Route::CloseWebSocket),
    ("GET", "/v1/stats", Route::Stats),
    ("GET", "/v1/logs", Route::Logs),
    ("GET", "/v1/reports", Route::Reports),
    ("GET", "/v1/queues", Route::Queues),
    ("GET", "/v1/queues/dead-letters", Route::QueueDeadLetters),
    ("POST", "/v1/queues/replay", Route::QueueReplay),
    ("POST", "/v1/queues/purge", Route::QueuePurge),
    ("GET", "/v1/http-clients", Route::HttpClients),
    ("GET", "/v1/cron", Route::Cron),
    ("GET", "/dashboard", Route::Dashboard),
    ("GET", "/dashboard/app.js", Route::DashboardScript),
    ("GET", "/dashboard/app.css", Route::DashboardStyle),
    ("GET", "/v1/whoami", Route::WhoAmI),
    ("POST", "/v1/reload", Route::Reload),
    ("GET", "/v1/resiliency", Route::Resiliency),
    ("PUT", "/v1/resiliency/policies", Route::SetPolicies),
    ("POST", "/v1/resiliency/breakers/reset", Route::ResetBreakers),
];

#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    NotFound,
    /// The path exists with these methods only.
    MethodNotAllowed(Vec<&'static str>),
}

/// Finds the route of a request; `{id}` comes back as the second value.
pub fn find<'p>(method: &str, path: &'p str) -> Result<(Route, Option<&'p str>), Miss> {
    let mut allowed = Vec::new();
    for &(m, template, route) in ROUTES {
        if let Some(id) = matches(template, path) {
            if m == method {
                return Ok((route, id));
            }
            allowed.push(m);
        }
    }
    if allowed.is_empty() {
        Err(Miss::NotFound)
    } else {
        Err(Miss::MethodNotAllowed(allowed))
    }
}

/// Some(captured id) if `path` fits `template`.
fn matches<'p>(template: &str, path: &'p str) -> Option<Option<&'p str>> {
    let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    let mut id = None;
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(id),
            (Some("{id}"), Some(seg)) if !seg.is_empty() => id = Some(seg),
            (Some(a), Some(b)) if a == b => {}
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_with_ids_methods_and_misses() {
        assert_eq!(find("GET", "/v1/services"), Ok((Route::ListServices, None)));
        assert_eq!(find("GET", "/v1/services/"), Ok((Route::ListServices, None)));
        assert_eq!(find("DELETE", "/v1/services/12"), Ok((Route::RemoveService, Some("12"))));
        assert_eq!(find("POST", "/v1/services/7/restart"), Ok((Route::RestartService, Some("7"))));
        assert_eq!(find("PUT", "/v1/services/7"), Err(Miss::MethodNotAllowed(vec!["GET", "PATCH", "DELETE"])));
        assert_eq!(find("GET", "/v1/services//restart"), Err(Miss::NotFound));
        assert_eq!(find("GET", "/v2/services"), Err(Miss::NotFound));
        assert_eq!(find("GET", "/"), Err(Miss::NotFound));
        assert_eq!(find("GET", "/metrics"), Ok((Route::Metrics, None)));
    }

    #[test]
    fn only_plain_reads_are_open_to_a_read_token() {
        for &(m, t, r) in ROUTES {
            assert_eq!(r.needs() == Role::Read, m == "GET", "{m} {t}");
        }
    }

    #[test]
    fn every_route_is_reachable_and_unique() {
        for (i, &(m, t, r)) in ROUTES.iter().enumerate() {
            let path = t.replace("{id}", "1");
            assert_eq!(find(m, &path).map(|x| x.0), Ok(r), "{m} {t}");
            assert!(!ROUTES[..i].iter().any(|&(m2, t2, _)| m2 == m && t2 == t), "{m} {t} twice");
        }
    }
}
