//! `enable-cors` and the `cors-*` annotations: ingress-nginx's defaults for what they leave
//! unset, and each setting read and checked. Apart from the other annotations because they are
//! read together, after the one that turns them on. Pure.

use super::values::{boolean, list, seconds};
use crate::kinds::ingress::NGINX_PREFIX;
use crate::table::OriginPattern;

/// ingress-nginx's CORS defaults, used for what `enable-cors` leaves unset.
const CORS_METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
const CORS_HEADERS: &str = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization";
const CORS_MAX_AGE: u64 = 1_728_000;

/// `enable-cors` and its settings, ingress-nginx's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsSettings {
    pub origins: Vec<String>,
    pub methods: Vec<String>,
    pub headers: Vec<String>,
    pub expose: Vec<String>,
    pub credentials: bool,
    pub max_age: u64,
}

impl CorsSettings {
    pub(super) fn default_nginx() -> Self {
        Self {
            origins: vec!["*".to_owned()],
            methods: list(CORS_METHODS),
            headers: list(CORS_HEADERS),
            expose: Vec::new(),
            credentials: true,
            max_age: CORS_MAX_AGE,
        }
    }

    /// Reads the `cors-*` annotations over the defaults; a bad value keeps the default.
    pub(super) fn read<'a>(
        &mut self,
        get: &dyn Fn(&str) -> Option<&'a str>,
        problems: &mut Vec<String>,
    ) {
        let mut bad = |name: &str, value: &str, why: &str| {
            problems.push(format!(
                "annotation {NGINX_PREFIX}{name}: {value:?} is {why} (ignored)"
            ));
        };
        if let Some(v) = get("cors-allow-origin") {
            let origins = list(v);
            match origins.iter().find(|o| OriginPattern::parse(o).is_none()) {
                Some(o) => bad(
                    "cors-allow-origin",
                    v,
                    &format!("not valid: {o:?} is not an origin"),
                ),
                None if origins.is_empty() => bad("cors-allow-origin", v, "empty"),
                None => self.origins = origins,
            }
        }
        if let Some(v) = get("cors-allow-methods") {
            let methods: Vec<String> = list(v).iter().map(|m| m.to_ascii_uppercase()).collect();
            if methods
                .iter()
                .all(|m| m.bytes().all(|b| b.is_ascii_uppercase()))
            {
                self.methods = methods;
            } else {
                bad("cors-allow-methods", v, "not a list of methods");
            }
        }
        for (name, field) in [
            ("cors-allow-headers", &mut self.headers),
            ("cors-expose-headers", &mut self.expose),
        ] {
            if let Some(v) = get(name) {
                let items = list(v);
                if items
                    .iter()
                    .all(|h| http::HeaderName::try_from(h.as_str()).is_ok())
                {
                    *field = items;
                } else {
                    bad(name, v, "not a list of header names");
                }
            }
        }
        if let Some(v) = get("cors-allow-credentials") {
            match boolean(v) {
                Ok(b) => self.credentials = b,
                Err(why) => bad("cors-allow-credentials", v, &why),
            }
        }
        if let Some(v) = get("cors-max-age") {
            match seconds(v) {
                Ok(s) if s > 0 && s <= u64::from(u32::MAX) => self.max_age = s,
                _ => bad("cors-max-age", v, "not a positive number of seconds"),
            }
        }
    }
}
