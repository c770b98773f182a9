//! The page's files, compiled into the binary: no CDN, nothing built or fetched at run time.

/// One embedded file.
pub struct Asset {
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

const INDEX: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!("assets/index.html"),
};
const SCRIPT: Asset = Asset {
    content_type: "text/javascript; charset=utf-8",
    bytes: include_bytes!("assets/app.js"),
};
const STYLE: Asset = Asset {
    content_type: "text/css; charset=utf-8",
    bytes: include_bytes!("assets/app.css"),
};

/// The asset served at `path`, if any.
pub fn find(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(INDEX),
        "/app.js" => Some(SCRIPT),
        "/app.css" => Some(STYLE),
        _ => None,
    }
}
