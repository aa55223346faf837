//! A posted form (`application/x-www-form-urlencoded`), read once.

use std::collections::HashMap;

/// The fields of a posted form (a repeated name keeps its first value).
#[derive(Debug, Default)]
pub struct Form(HashMap<String, String>);

/// Most fields a console form has; more is not a console form.
const MAX_FIELDS: usize = 32;

impl Form {
    /// Parses `body` if `content_type` says it is a form.
    pub fn parse(content_type: Option<&str>, body: &[u8]) -> Option<Form> {
        let essence = content_type?.split(';').next()?.trim();
        if !essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
            return None;
        }
        let mut fields = HashMap::new();
        for (k, v) in form_urlencoded::parse(body).take(MAX_FIELDS) {
            fields
                .entry(k.into_owned())
                .or_insert_with(|| v.into_owned());
        }
        Some(Form(fields))
    }

    /// A query string's fields.
    pub fn query(query: Option<&str>) -> Form {
        let mut fields = HashMap::new();
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()).take(MAX_FIELDS) {
            fields
                .entry(k.into_owned())
                .or_insert_with(|| v.into_owned());
        }
        Form(fields)
    }

    /// A field, trimmed; absent or empty: `None`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }
}

/// `value` with `%`-escapes for a query string.
pub fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
