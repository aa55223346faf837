//! The vocabulary of check functions (§6.2, §6.3): what a check returns,
//! the two halves of a check function, and the registry of named ones.
//! The built-ins are in `checks.rs`; `verification.rs` compiles specs
//! against a registry.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The outcome of a check (§6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    /// Whether the output passed.
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Its score, 0 to 1.
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Why, for people.
    pub details: Option<String>,
}

impl CheckResult {
    /// Passed with score 1.
    pub fn pass() -> Self {
        Self {
            passed: true,
            score: Some(1.0),
            details: None,
        }
    }

    /// Failed with score 0 and a reason.
    pub fn fail(details: impl Into<String>) -> Self {
        Self {
            passed: false,
            score: Some(0.0),
            details: Some(details.into()),
        }
    }

    /// Passed or failed with score 1 or 0 and no details.
    pub fn from_bool(passed: bool) -> Self {
        Self {
            passed,
            score: Some(if passed { 1.0 } else { 0.0 }),
            details: None,
        }
    }

    /// The score, or 1/0 from `passed` when there is none (§6.4).
    pub fn effective_score(&self) -> f64 {
        self.score.unwrap_or(if self.passed { 1.0 } else { 0.0 })
    }
}

/// Deserializes a present field, `null` included, as `Some`.
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Why a check's parameters were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CheckError(pub String);

/// A check function (§6.2), split in two so that parameter errors surface
/// when a spec is compiled, not when an output happens to reach the check.
pub trait CheckFunction: Send + Sync {
    /// Validates `params` and prepares the check (compiling regexes, schemas).
    fn prepare(&self, params: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError>;
}

/// A check with its parameters bound, ready to judge outputs.
pub trait PreparedCheck: Send + Sync {
    /// Judges an output.
    fn run(&self, output: &Value) -> CheckResult;
}

/// Named check functions (§6.3).
pub struct CheckFunctionRegistry {
    functions: BTreeMap<String, Box<dyn CheckFunction>>,
}

impl CheckFunctionRegistry {
    /// A registry with no functions.
    pub fn empty() -> Self {
        Self {
            functions: BTreeMap::new(),
        }
    }

    /// Adds or replaces a function.
    pub fn register(&mut self, name: &str, function: Box<dyn CheckFunction>) {
        self.functions.insert(name.to_owned(), function);
    }

    /// The function called `name`.
    pub fn get(&self, name: &str) -> Option<&dyn CheckFunction> {
        self.functions.get(name).map(|f| f.as_ref())
    }

    /// The registered names, sorted.
    pub fn list(&self) -> Vec<&str> {
        self.functions.keys().map(String::as_str).collect()
    }
}

impl fmt::Debug for CheckFunctionRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckFunctionRegistry")
            .field("functions", &self.list())
            .finish()
    }
}

/// A JSON Schema draft-07 validator for untrusted schemas. No remote or file
/// `$ref` is ever fetched: such a schema does not compile.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::draft7::new(schema).map_err(|e| e.to_string())
}

/// Validates `instance`, with every validator error message on failure.
pub fn schema_result(validator: &jsonschema::Validator, instance: &Value) -> CheckResult {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        CheckResult::pass()
    } else {
        CheckResult::fail(errors.join("; "))
    }
}
