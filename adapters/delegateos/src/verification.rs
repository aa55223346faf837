//! Output verification (§6, §10.3): the verification spec a contract carries,
//! compiled once into a [`VerificationPlan`] and run against outputs.
//!
//! Compiling checks the whole spec before any output is judged: an unknown
//! check name, bad parameters, a regex or schema that does not compile, bad
//! weights, anywhere in the tree, make the spec invalid (an error, never a
//! pass), even in a step that `all_pass` would never reach.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonicalize;
pub(crate) use crate::check::present;
pub use crate::check::{
    compile_schema, schema_result, CheckError, CheckFunction, CheckFunctionRegistry, CheckResult,
    PreparedCheck,
};

/// Tolerance on the sum of `weighted` weights (§6.4).
pub const WEIGHT_TOLERANCE: f64 = 0.001;
/// Default `passThreshold` of `weighted` composites (§6.4).
pub const DEFAULT_PASS_THRESHOLD: f64 = 0.7;

/// How a composite combines its steps (§6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompositeMode {
    /// Every step must pass.
    AllPass,
    /// More than half of the steps must pass.
    Majority,
    /// The weighted score must reach `passThreshold`.
    Weighted,
}

/// A verification spec (§6.1), one variant per method. Only the fields of
/// its method are accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum VerificationSpec {
    #[serde(rename_all = "camelCase")]
    /// Validates the output against a JSON Schema.
    SchemaMatch {
        /// The schema (draft-07).
        schema: Value,
    },
    #[serde(rename_all = "camelCase")]
    /// Runs a named check function.
    DeterministicCheck {
        /// The check function's name.
        check_name: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        /// Its parameters.
        check_params: Option<Value>,
        /// Compared with the whole `CheckResult` by canonical JSON (§10.3);
        /// an explicit `null` is a value, unlike an absent field.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        expected_result: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    /// Combines several specs.
    Composite {
        /// The specs combined.
        steps: Vec<VerificationSpec>,
        /// How they combine.
        mode: CompositeMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// One weight per step (`weighted` only).
        weights: Option<Vec<f64>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The score to reach (`weighted`; default 0.7).
        pass_threshold: Option<f64>,
    },
}

impl VerificationSpec {
    /// The method name, as on the wire.
    pub fn method(&self) -> &'static str {
        match self {
            VerificationSpec::SchemaMatch { .. } => "schema_match",
            VerificationSpec::DeterministicCheck { .. } => "deterministic_check",
            VerificationSpec::Composite { .. } => "composite",
        }
    }
}

/// Why a verification spec cannot be used. The path names the step, such as
/// `steps[1].steps[0]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid verification spec at {path}: {problem}")]
pub struct SpecError {
    /// Where in the spec (`verification.steps[1]`).
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

/// A compiled verification spec.
pub struct VerificationPlan {
    node: Node,
}

impl fmt::Debug for VerificationPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VerificationPlan")
    }
}

enum Node {
    Schema(jsonschema::Validator),
    Check {
        check: Box<dyn PreparedCheck>,
        expected: Option<Vec<u8>>,
    },
    Composite {
        steps: Vec<Node>,
        mode: CompositeMode,
        weights: Vec<f64>,
        threshold: f64,
    },
}

impl VerificationPlan {
    /// Compiles a spec against a registry.
    pub fn compile(
        spec: &VerificationSpec,
        registry: &CheckFunctionRegistry,
    ) -> Result<Self, SpecError> {
        Ok(Self {
            node: compile(spec, registry, "verification")?,
        })
    }

    /// Judges an output (§10.3).
    pub fn run(&self, output: &Value) -> CheckResult {
        self.node.run(output)
    }
}

fn compile(
    spec: &VerificationSpec,
    registry: &CheckFunctionRegistry,
    path: &str,
) -> Result<Node, SpecError> {
    let err = |problem: String| SpecError {
        path: path.to_owned(),
        problem,
    };
    match spec {
        VerificationSpec::SchemaMatch { schema } => compile_schema(schema)
            .map(Node::Schema)
            .map_err(|e| err(format!("schema does not compile: {e}"))),
        VerificationSpec::DeterministicCheck {
            check_name,
            check_params,
            expected_result,
        } => {
            let function = registry.get(check_name).ok_or_else(|| {
                err(format!(
                    "unknown check function {check_name:?} (known: {})",
                    registry.list().join(", ")
                ))
            })?;
            let check = function
                .prepare(check_params.as_ref())
                .map_err(|e| err(format!("{check_name}: {e}")))?;
            let expected = expected_result
                .as_ref()
                .map(|v| canonicalize(v).map_err(|e| err(e.to_string())))
                .transpose()?;
            Ok(Node::Check { check, expected })
        }
        VerificationSpec::Composite {
            steps,
            mode,
            weights,
            pass_threshold,
        } => {
            if steps.is_empty() {
                return Err(err("a composite needs at least one step".into()));
            }
            let nodes = steps
                .iter()
                .enumerate()
                .map(|(i, s)| compile(s, registry, &format!("{path}.steps[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            let (weights, threshold) = match mode {
                CompositeMode::Weighted => {
                    let weights = weights
                        .clone()
                        .ok_or_else(|| err("weighted mode needs weights".into()))?;
                    if weights.len() != steps.len() {
                        return Err(err(format!(
                            "{} weights for {} steps",
                            weights.len(),
                            steps.len()
                        )));
                    }
                    if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
                        return Err(err(format!("weight {w} is negative")));
                    }
                    let sum: f64 = weights.iter().sum();
                    if (sum - 1.0).abs() > WEIGHT_TOLERANCE {
                        return Err(err(format!(
                            "weights sum to {sum}, not 1 ± {WEIGHT_TOLERANCE}"
                        )));
                    }
                    let threshold = pass_threshold.unwrap_or(DEFAULT_PASS_THRESHOLD);
                    if !(0.0..=1.0).contains(&threshold) {
                        return Err(err(format!("passThreshold {threshold} is outside 0..1")));
                    }
                    (weights, threshold)
                }
                _ if weights.is_some() || pass_threshold.is_some() => {
                    return Err(err(
                        "weights and passThreshold belong to weighted mode only".into(),
                    ))
                }
                _ => (Vec::new(), DEFAULT_PASS_THRESHOLD),
            };
            Ok(Node::Composite {
                steps: nodes,
                mode: *mode,
                weights,
                threshold,
            })
        }
    }
}

impl Node {
    fn run(&self, output: &Value) -> CheckResult {
        match self {
            Node::Schema(validator) => schema_result(validator, output),
            Node::Check { check, expected } => {
                let mut result = check.run(output);
                if let Some(expected) = expected {
                    // §10.3: the whole result is compared with expectedResult.
                    let actual = canonicalize(&result).unwrap_or_default();
                    result.passed = &actual == expected;
                }
                result
            }
            Node::Composite {
                steps,
                mode,
                weights,
                threshold,
            } => match mode {
                CompositeMode::AllPass => {
                    for (i, step) in steps.iter().enumerate() {
                        let r = step.run(output);
                        if !r.passed {
                            return CheckResult::fail(format!(
                                "Step {i} failed: {}",
                                r.details.as_deref().unwrap_or("no details")
                            ));
                        }
                    }
                    CheckResult::pass()
                }
                CompositeMode::Majority => {
                    let results: Vec<CheckResult> = steps.iter().map(|s| s.run(output)).collect();
                    let passed = results.iter().filter(|r| r.passed).count();
                    let failed: Vec<String> = results
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| !r.passed)
                        .map(|(i, r)| {
                            format!("step {i}: {}", r.details.as_deref().unwrap_or("failed"))
                        })
                        .collect();
                    CheckResult {
                        passed: passed * 2 > results.len(),
                        score: Some(passed as f64 / results.len() as f64),
                        details: (!failed.is_empty()).then(|| {
                            format!(
                                "{passed} of {} steps passed; {}",
                                results.len(),
                                failed.join("; ")
                            )
                        }),
                    }
                }
                CompositeMode::Weighted => {
                    let score: f64 = steps
                        .iter()
                        .zip(weights)
                        .map(|(s, w)| w * s.run(output).effective_score())
                        .sum();
                    CheckResult {
                        passed: score >= *threshold,
                        score: Some(score),
                        details: (score < *threshold)
                            .then(|| format!("weighted score {score} is below {threshold}")),
                    }
                }
            },
        }
    }
}
