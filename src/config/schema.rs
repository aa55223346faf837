//! The configuration's JSON Schema (`dgw config schema`, shipped as
//! `config/schema.json` for editors): made from the very types the file is
//! read into, so it cannot drift from what `dgw` accepts. It says the
//! shape (keys, types, defaults); `dgw config check` says the rest (values,
//! files, listeners).

/// The schema as pretty JSON.
pub fn text() -> String {
    let schema = schemars::schema_for!(super::RawConfig);
    serde_json::to_string_pretty(&schema).expect("a schema always serializes")
}
