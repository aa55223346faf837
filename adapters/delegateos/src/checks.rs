//! The seven built-in check functions (§6.2).
//!
//! Results carry the same `passed`/`score`/`details` as the TypeScript
//! reference's, so an `expectedResult` written against it compares equal
//! here. Parameters are typed and unknown parameters are refused.

use regex::{Regex, RegexBuilder};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::canonical::canonicalize;
use crate::check::{
    compile_schema, present, schema_result, CheckError, CheckFunction, CheckFunctionRegistry,
    CheckResult, PreparedCheck,
};

/// Longest regex pattern accepted from a contract.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Compiled-size limit for regexes from contracts.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl CheckFunctionRegistry {
    /// The seven built-ins: `regex_match`, `json_schema`, `string_length`,
    /// `array_length`, `field_exists`, `exit_code`, `output_equals`.
    pub fn with_builtins() -> Self {
        let mut registry = Self::empty();
        register_builtins(&mut registry);
        registry
    }
}

impl Default for CheckFunctionRegistry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

fn register_builtins(registry: &mut CheckFunctionRegistry) {
    registry.register("regex_match", Box::new(Builtin(prepare_regex_match)));
    registry.register("json_schema", Box::new(Builtin(prepare_json_schema)));
    registry.register("string_length", Box::new(Builtin(prepare_string_length)));
    registry.register("array_length", Box::new(Builtin(prepare_array_length)));
    registry.register("field_exists", Box::new(Builtin(prepare_field_exists)));
    registry.register("exit_code", Box::new(Builtin(prepare_exit_code)));
    registry.register("output_equals", Box::new(Builtin(prepare_output_equals)));
}

type Prepare = fn(Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError>;

/// A built-in: a function that prepares a check from its parameters.
struct Builtin(Prepare);

impl CheckFunction for Builtin {
    fn prepare(&self, params: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
        (self.0)(params)
    }
}

/// A prepared check that is a closure over its parameters.
struct Prepared<F>(F);

impl<F: Fn(&Value) -> CheckResult + Send + Sync> PreparedCheck for Prepared<F> {
    fn run(&self, output: &Value) -> CheckResult {
        (self.0)(output)
    }
}

fn boxed(f: impl Fn(&Value) -> CheckResult + Send + Sync + 'static) -> Box<dyn PreparedCheck> {
    Box::new(Prepared(f))
}

fn params<T: DeserializeOwned>(params: Option<&Value>) -> Result<T, CheckError> {
    let value = params.cloned().unwrap_or(Value::Object(Default::default()));
    serde_json::from_value(value).map_err(|e| CheckError(format!("bad params: {e}")))
}

/// Follows a dot-path (`a.b.0.c`) into objects and arrays; an empty or absent
/// path is the whole output. `None` when any step is missing.
pub fn field<'a>(output: &'a Value, path: Option<&str>) -> Option<&'a Value> {
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return Some(output);
    };
    path.split('.')
        .try_fold(output, |current, part| match current {
            Value::Object(map) => map.get(part),
            Value::Array(items) => part
                .parse::<usize>()
                .ok()
                .filter(|_| part == "0" || !part.starts_with('0'))
                .and_then(|i| items.get(i)),
            _ => None,
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegexParams {
    pattern: String,
    #[serde(default)]
    flags: Option<String>,
    #[serde(default)]
    field: Option<String>,
}

/// `regex_match`: JavaScript `RegExp.test` semantics with a linear-time
/// engine. Flags `i`, `m`, `s`, `u`, `g` and `y` (sticky: the match must start
/// at the beginning) are understood; lookaround and backreferences are not
/// supported by the engine and make the spec invalid.
fn prepare_regex_match(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: RegexParams = params(p)?;
    if p.pattern.len() > MAX_PATTERN_BYTES {
        return Err(CheckError(format!(
            "pattern is {} bytes, more than {MAX_PATTERN_BYTES}",
            p.pattern.len()
        )));
    }
    let mut builder = RegexBuilder::new(&p.pattern);
    builder.size_limit(REGEX_SIZE_LIMIT);
    let mut sticky = false;
    let flags = p.flags.unwrap_or_default();
    for (i, flag) in flags.chars().enumerate() {
        if flags.chars().take(i).any(|f| f == flag) {
            return Err(CheckError(format!("flag {flag:?} repeated")));
        }
        match flag {
            'i' => {
                builder.case_insensitive(true);
            }
            'm' => {
                builder.multi_line(true);
            }
            's' => {
                builder.dot_matches_new_line(true);
            }
            'u' | 'g' => {}
            'y' => sticky = true,
            other => return Err(CheckError(format!("unsupported regex flag {other:?}"))),
        }
    }
    let regex: Regex = builder
        .build()
        .map_err(|e| CheckError(format!("pattern does not compile: {e}")))?;
    let path = p.field;
    Ok(boxed(move |output| match field(output, path.as_deref()) {
        Some(Value::String(s)) => {
            let found = regex.find(s).is_some_and(|m| !sticky || m.start() == 0);
            CheckResult::from_bool(found)
        }
        _ => CheckResult::fail("Value is not a string"),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaParams {
    schema: Value,
}

/// `json_schema`: JSON Schema draft-07, with the validator's messages.
fn prepare_json_schema(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: SchemaParams = params(p)?;
    let validator = compile_schema(&p.schema)
        .map_err(|e| CheckError(format!("schema does not compile: {e}")))?;
    Ok(boxed(move |output| schema_result(&validator, output)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LengthParams {
    #[serde(default)]
    min: Option<u64>,
    #[serde(default)]
    max: Option<u64>,
    #[serde(default)]
    field: Option<String>,
}

fn bounds_result(len: u64, p: &LengthParams, what: &str) -> CheckResult {
    let passed = p.min.is_none_or(|m| len >= m) && p.max.is_none_or(|m| len <= m);
    if passed {
        CheckResult::pass()
    } else {
        CheckResult::fail(format!("{what} {len} out of bounds"))
    }
}

/// `string_length`: length in UTF-16 code units, as JavaScript counts.
fn prepare_string_length(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: LengthParams = params(p)?;
    Ok(boxed(move |output| {
        match field(output, p.field.as_deref()) {
            Some(Value::String(s)) => bounds_result(s.encode_utf16().count() as u64, &p, "Length"),
            _ => CheckResult::fail("Value is not a string"),
        }
    }))
}

/// `array_length`.
fn prepare_array_length(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: LengthParams = params(p)?;
    Ok(boxed(move |output| {
        match field(output, p.field.as_deref()) {
            Some(Value::Array(items)) => bounds_result(items.len() as u64, &p, "Array length"),
            _ => CheckResult::fail("Value is not an array"),
        }
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldsParams {
    fields: Vec<String>,
}

/// `field_exists`: every dot-path is present (`null` counts as present).
fn prepare_field_exists(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: FieldsParams = params(p)?;
    if p.fields.is_empty() {
        return Err(CheckError("fields must name at least one field".into()));
    }
    Ok(boxed(move |output| {
        let missing: Vec<&str> = p
            .fields
            .iter()
            .filter(|f| field(output, Some(f)).is_none())
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            CheckResult::pass()
        } else {
            CheckResult::fail(format!("Missing fields: {}", missing.join(", ")))
        }
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExitCodeParams {
    expected: f64,
}

/// `exit_code`: `output.exitCode` equals `expected` as numbers.
fn prepare_exit_code(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: ExitCodeParams = params(p)?;
    Ok(boxed(move |output| match output.get("exitCode") {
        Some(code) if output.is_object() => {
            CheckResult::from_bool(code.as_f64() == Some(p.expected))
        }
        _ => CheckResult::fail("Output missing exitCode field"),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EqualsParams {
    #[serde(default, deserialize_with = "present")]
    expected: Option<Value>,
}

/// `output_equals`: canonical-JSON equality.
fn prepare_output_equals(p: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
    let p: EqualsParams = params(p)?;
    let expected = p
        .expected
        .ok_or_else(|| CheckError("bad params: missing field `expected`".into()))?;
    let expected = canonicalize(&expected).map_err(|e| CheckError(e.to_string()))?;
    Ok(boxed(move |output| {
        CheckResult::from_bool(canonicalize(output).is_ok_and(|actual| actual == expected))
    }))
}
