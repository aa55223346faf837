//! The configuration's JSON Schema (`dgw config schema`, shipped as
//! `config/schema.json` for editors): made from the very types the file is
//! read into, so it cannot drift from what `dgw` accepts: the gateway's own
//! keys from [`super::RawConfig`], each protocol's section from its module.
//! It says the shape (keys, types, defaults); `dgw config check` says the
//! rest (values, files, listeners).

use dgw_protocol::Module;

/// The schema as pretty JSON, with `modules`' sections.
pub fn text(modules: &[&dyn Module]) -> String {
    let mut generator = schemars::SchemaGenerator::default();
    let sections: Vec<(&str, serde_json::Value)> = modules
        .iter()
        .map(|m| {
            let schema = m
                .schema(&mut generator)
                .map_or_else(|| serde_json::json!({"type": "object"}), |s| s.to_value());
            (m.section(), schema)
        })
        .collect();
    let mut schema = generator.root_schema_for::<super::RawConfig>().to_value();
    if let Some(root) = schema.as_object_mut() {
        if let Some(serde_json::Value::Object(properties)) = root.get_mut("properties") {
            for (name, section) in sections {
                properties.insert(name.to_owned(), section);
            }
        }
        // A key neither the gateway's nor a listed protocol's is refused.
        root.insert("additionalProperties".into(), false.into());
    }
    serde_json::to_string_pretty(&schema).expect("a schema always serializes")
}
