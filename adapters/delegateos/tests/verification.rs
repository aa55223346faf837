//! Output verification (§6, §10.3): every built-in check and every composite mode.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use delegateos::verification::{
    CheckFunctionRegistry, CheckResult, VerificationPlan, VerificationSpec,
};
use serde_json::{json, Value};

fn spec(v: Value) -> VerificationSpec {
    serde_json::from_value(v).unwrap()
}

fn plan(v: Value) -> VerificationPlan {
    VerificationPlan::compile(&spec(v), &CheckFunctionRegistry::with_builtins()).unwrap()
}

fn run(v: Value, output: Value) -> CheckResult {
    plan(v).run(&output)
}

fn check(name: &str, params: Value, output: Value) -> CheckResult {
    run(
        json!({"method": "deterministic_check", "checkName": name, "checkParams": params}),
        output,
    )
}

fn invalid(v: Value) -> String {
    let s: VerificationSpec = match serde_json::from_value(v) {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    match VerificationPlan::compile(&s, &CheckFunctionRegistry::with_builtins()) {
        Ok(_) => panic!("spec should be invalid"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn registry_lists_the_seven_builtins() {
    assert_eq!(
        CheckFunctionRegistry::with_builtins().list(),
        [
            "array_length",
            "exit_code",
            "field_exists",
            "json_schema",
            "output_equals",
            "regex_match",
            "string_length"
        ]
    );
}

#[test]
fn regex_match() {
    let out = json!({"report": {"lines": ["Summary: ok", "second"]}, "n": 5});
    assert!(
        check(
            "regex_match",
            json!({"pattern": "^Summary"}),
            json!("Summary: fine")
        )
        .passed
    );
    assert!(
        !check(
            "regex_match",
            json!({"pattern": "^summary"}),
            json!("Summary: fine")
        )
        .passed
    );
    assert!(
        check(
            "regex_match",
            json!({"pattern": "^summary", "flags": "i"}),
            json!("Summary")
        )
        .passed
    );
    assert!(
        check(
            "regex_match",
            json!({"pattern": "^ok$", "flags": "m"}),
            json!("x\nok\ny")
        )
        .passed
    );
    assert!(!check("regex_match", json!({"pattern": "^ok$"}), json!("x\nok\ny")).passed);
    assert!(
        check(
            "regex_match",
            json!({"pattern": "a.b", "flags": "s"}),
            json!("a\nb")
        )
        .passed
    );
    assert!(!check("regex_match", json!({"pattern": "a.b"}), json!("a\nb")).passed);
    assert!(
        check(
            "regex_match",
            json!({"pattern": "b", "flags": "g"}),
            json!("abc")
        )
        .passed
    );
    assert!(
        !check(
            "regex_match",
            json!({"pattern": "b", "flags": "y"}),
            json!("abc")
        )
        .passed,
        "sticky anchors at 0"
    );
    assert!(
        check(
            "regex_match",
            json!({"pattern": "a", "flags": "y"}),
            json!("abc")
        )
        .passed
    );
    // Dot-paths, into arrays too.
    let r = check(
        "regex_match",
        json!({"pattern": "^Summary", "field": "report.lines.0"}),
        out.clone(),
    );
    assert_eq!(
        r,
        CheckResult {
            passed: true,
            score: Some(1.0),
            details: None
        }
    );
    assert!(
        !check(
            "regex_match",
            json!({"pattern": "^Summary", "field": "report.lines.1"}),
            out.clone()
        )
        .passed
    );
    let missing = check(
        "regex_match",
        json!({"pattern": "x", "field": "report.nope"}),
        out.clone(),
    );
    assert_eq!(missing, CheckResult::fail("Value is not a string"));
    assert_eq!(
        check(
            "regex_match",
            json!({"pattern": "5", "field": "n"}),
            out.clone()
        ),
        CheckResult::fail("Value is not a string")
    );
    assert!(
        !check(
            "regex_match",
            json!({"pattern": "x", "field": "report.lines.01"}),
            out
        )
        .passed,
        "no leading zeros"
    );
    // Catastrophic in backtracking engines; linear here.
    let evil = format!("{}!", "a".repeat(50_000));
    assert!(!check("regex_match", json!({"pattern": "^(a+)+$"}), json!(evil)).passed);
}

#[test]
fn regex_params_are_checked_when_compiled() {
    let bad = |params: Value| {
        invalid(
            json!({"method": "deterministic_check", "checkName": "regex_match", "checkParams": params}),
        )
    };
    assert!(bad(json!({})).contains("pattern"));
    assert!(bad(json!({"pattern": "("})).contains("does not compile"));
    assert!(
        bad(json!({"pattern": "(?=x)"})).contains("does not compile"),
        "lookahead is not linear-time"
    );
    assert!(bad(json!({"pattern": "(a)\\1"})).contains("does not compile"));
    assert!(bad(json!({"pattern": "a", "flags": "x"})).contains("unsupported regex flag"));
    assert!(bad(json!({"pattern": "a", "flags": "ii"})).contains("repeated"));
    assert!(bad(json!({"pattern": "a".repeat(5000)})).contains("more than"));
    assert!(
        bad(json!({"pattern": "\\w{1000}{1000}"})).contains("does not compile"),
        "size limit"
    );
    assert!(bad(json!({"pattern": "a", "flag": "i"})).contains("unknown field"));
    assert!(bad(json!({"pattern": 5})).contains("bad params"));
}

#[test]
fn json_schema_check() {
    let schema = json!({"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}});
    assert_eq!(
        check(
            "json_schema",
            json!({"schema": schema}),
            json!({"title": "x"})
        ),
        CheckResult::pass()
    );
    let r = check(
        "json_schema",
        json!({"schema": schema}),
        json!({"title": 5}),
    );
    assert!(!r.passed);
    assert!(r.details.unwrap().contains("/title"));
    let r = check("json_schema", json!({"schema": schema}), json!({}));
    assert!(r.details.unwrap().contains("title"));
    assert!(invalid(json!({"method": "deterministic_check", "checkName": "json_schema", "checkParams": {"schema": {"type": 5}}})).contains("schema"));
    assert!(invalid(json!({"method": "deterministic_check", "checkName": "json_schema", "checkParams": {"schema": {"$ref": "https://example.com/s.json"}}})).contains("schema"), "no remote refs");
}

#[test]
fn string_and_array_length() {
    let sl = |params: Value, out: Value| check("string_length", params, out);
    assert!(sl(json!({"min": 1, "max": 3}), json!("abc")).passed);
    assert_eq!(
        sl(json!({"min": 1, "max": 2}), json!("abc")),
        CheckResult::fail("Length 3 out of bounds")
    );
    assert!(!sl(json!({"min": 1}), json!("")).passed);
    assert!(sl(json!({}), json!("")).passed);
    // JavaScript counts UTF-16 code units: 😀 is 2.
    assert!(sl(json!({"max": 2}), json!("😀")).passed);
    assert!(!sl(json!({"max": 1}), json!("😀")).passed);
    assert!(sl(json!({"field": "a.b", "min": 2}), json!({"a": {"b": "xy"}})).passed);
    assert_eq!(
        sl(json!({"field": "a.c"}), json!({"a": {"b": "xy"}})),
        CheckResult::fail("Value is not a string")
    );
    assert!(invalid(json!({"method": "deterministic_check", "checkName": "string_length", "checkParams": {"min": -1}})).contains("bad params"));

    let al = |params: Value, out: Value| check("array_length", params, out);
    assert!(
        al(json!({"min": 0, "max": 0}), json!([])).passed,
        "empty array within 0..0"
    );
    assert!(
        !al(json!({"min": 1}), json!([])).passed,
        "empty array below min"
    );
    assert_eq!(
        al(json!({"max": 1}), json!([1, 2])),
        CheckResult::fail("Array length 2 out of bounds")
    );
    assert!(
        al(
            json!({"field": "items", "min": 2}),
            json!({"items": [1, 2]})
        )
        .passed
    );
    assert!(
        al(
            json!({"field": "rows.1", "min": 1}),
            json!({"rows": [[], [0]]})
        )
        .passed
    );
    assert_eq!(
        al(json!({}), json!("not an array")),
        CheckResult::fail("Value is not an array")
    );
}

#[test]
fn field_exists_check() {
    let out = json!({"a": {"b": null, "list": [{"id": 1}]}, "c": 0});
    assert!(
        check(
            "field_exists",
            json!({"fields": ["a.b", "c", "a.list.0.id"]}),
            out.clone()
        )
        .passed,
        "null is present"
    );
    let r = check(
        "field_exists",
        json!({"fields": ["a.b", "x", "a.list.1.id", "c.d"]}),
        out,
    );
    assert_eq!(r, CheckResult::fail("Missing fields: x, a.list.1.id, c.d"));
    assert!(invalid(json!({"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": []}})).contains("at least one"));
    assert!(
        invalid(json!({"method": "deterministic_check", "checkName": "field_exists"}))
            .contains("fields")
    );
}

#[test]
fn exit_code_check() {
    assert!(check("exit_code", json!({"expected": 0}), json!({"exitCode": 0})).passed);
    assert!(
        check(
            "exit_code",
            json!({"expected": 0}),
            json!({"exitCode": 0.0})
        )
        .passed
    );
    assert_eq!(
        check("exit_code", json!({"expected": 0}), json!({"exitCode": 1})),
        CheckResult::from_bool(false)
    );
    assert!(
        !check(
            "exit_code",
            json!({"expected": 0}),
            json!({"exitCode": "0"})
        )
        .passed
    );
    assert_eq!(
        check("exit_code", json!({"expected": 0}), json!({})),
        CheckResult::fail("Output missing exitCode field")
    );
    assert_eq!(
        check("exit_code", json!({"expected": 0}), json!(0)),
        CheckResult::fail("Output missing exitCode field")
    );
    assert!(invalid(json!({"method": "deterministic_check", "checkName": "exit_code", "checkParams": {"expected": "0"}})).contains("bad params"));
}

#[test]
fn output_equals_check() {
    assert!(
        check(
            "output_equals",
            json!({"expected": {"a": [1, 2], "b": 1.0}}),
            json!({"b": 1, "a": [1, 2]})
        )
        .passed
    );
    assert!(
        !check(
            "output_equals",
            json!({"expected": {"a": [2, 1]}}),
            json!({"a": [1, 2]})
        )
        .passed
    );
    assert!(check("output_equals", json!({"expected": null}), json!(null)).passed);
    assert!(invalid(
        json!({"method": "deterministic_check", "checkName": "output_equals", "checkParams": {}})
    )
    .contains("expected"));
}

#[test]
fn expected_result_compares_the_whole_result() {
    let base = json!({"method": "deterministic_check", "checkName": "string_length", "checkParams": {"max": 2}});
    let mut s = base.clone();
    s["expectedResult"] = json!({"passed": false, "score": 0, "details": "Length 3 out of bounds"});
    let r = run(s.clone(), json!("abc"));
    assert!(r.passed, "the failure was the expected result");
    assert!(
        !run(s, json!("ab")).passed,
        "a pass is not the expected failure"
    );
    let mut s = base;
    s["expectedResult"] = Value::Null;
    assert!(
        !run(s.clone(), json!("ab")).passed,
        "explicit null is a value to compare, not absence"
    );
    assert_eq!(spec(s.clone()), spec(s));
}

#[test]
fn schema_match_method() {
    let s = json!({"method": "schema_match", "schema": {"type": "array", "minItems": 1}});
    assert_eq!(run(s.clone(), json!([1])), CheckResult::pass());
    let r = run(s, json!([]));
    assert_eq!(r.score, Some(0.0));
    assert!(r.details.is_some());
    assert!(invalid(json!({"method": "schema_match"})).contains("schema"));
}

fn step(pass: bool) -> Value {
    json!({"method": "deterministic_check", "checkName": "output_equals", "checkParams": {"expected": pass}})
}

#[test]
fn all_pass_short_circuits() {
    let s = json!({"method": "composite", "mode": "all_pass", "steps": [step(true), step(true)]});
    assert_eq!(run(s, json!(true)), CheckResult::pass());
    let s = json!({"method": "composite", "mode": "all_pass", "steps": [
        step(true),
        {"method": "deterministic_check", "checkName": "string_length", "checkParams": {}},
        step(true)
    ]});
    let r = run(s, json!(true));
    assert_eq!(r, CheckResult::fail("Step 1 failed: Value is not a string"));
    let s = json!({"method": "composite", "mode": "all_pass", "steps": [step(false)]});
    assert_eq!(
        run(s, json!(true)).details.unwrap(),
        "Step 0 failed: no details"
    );
}

#[test]
fn majority_is_strictly_more_than_half() {
    let maj = |steps: Vec<Value>| {
        run(
            json!({"method": "composite", "mode": "majority", "steps": steps}),
            json!(true),
        )
    };
    let r = maj(vec![step(true), step(false)]);
    assert!(!r.passed, "1 of 2 is not a majority");
    assert_eq!(r.score, Some(0.5));
    assert!(maj(vec![step(true), step(true), step(false)]).passed);
    assert!(!maj(vec![step(true), step(false), step(false)]).passed);
    assert!(maj(vec![step(true)]).passed);
    assert!(!maj(vec![step(false)]).passed);
}

#[test]
fn weighted_scores_and_thresholds() {
    let w = |weights: Value, threshold: Option<f64>, steps: Vec<Value>| {
        let mut s =
            json!({"method": "composite", "mode": "weighted", "steps": steps, "weights": weights});
        if let Some(t) = threshold {
            s["passThreshold"] = json!(t);
        }
        s
    };
    // Default threshold 0.7: 0.7 passes, 0.69 does not.
    let r = run(
        w(json!([0.7, 0.3]), None, vec![step(true), step(false)]),
        json!(true),
    );
    assert!(r.passed);
    assert!((r.score.unwrap() - 0.7).abs() < 1e-12);
    assert!(
        !run(
            w(json!([0.69, 0.31]), None, vec![step(true), step(false)]),
            json!(true)
        )
        .passed
    );
    assert!(
        run(
            w(json!([0.5, 0.5]), Some(0.5), vec![step(true), step(false)]),
            json!(true)
        )
        .passed
    );
    // Steps with a score use it: string_length scores 1 or 0 on its own.
    // Weights within 0.001 of 1 are fine; 0.002 off is not.
    assert!(
        run(
            w(json!([0.5, 0.501]), None, vec![step(true), step(true)]),
            json!(true)
        )
        .passed
    );
    assert!(invalid(w(json!([0.5, 0.502]), None, vec![step(true), step(true)])).contains("sum"));
    assert!(invalid(w(json!([0.5, 0.498]), None, vec![step(true), step(true)])).contains("sum"));
    assert!(invalid(w(json!([1.0]), None, vec![step(true), step(true)]))
        .contains("1 weights for 2 steps"));
    assert!(
        invalid(w(json!([1.5, -0.5]), None, vec![step(true), step(true)])).contains("negative")
    );
    assert!(
        invalid(json!({"method": "composite", "mode": "weighted", "steps": [step(true)]}))
            .contains("needs weights")
    );
    assert!(invalid(w(json!([1.0]), Some(1.5), vec![step(true)])).contains("passThreshold"));
    assert!(invalid(
        json!({"method": "composite", "mode": "majority", "steps": [step(true)], "weights": [1.0]})
    )
    .contains("weighted mode only"));
}

#[test]
fn missing_scores_count_as_one_or_zero() {
    // A step without a score: expectedResult keeps the check's score, so use a
    // custom registry function that returns no score.
    use delegateos::verification::{CheckError, CheckFunction, PreparedCheck};
    struct NoScore;
    struct NoScoreRun(bool);
    impl CheckFunction for NoScore {
        fn prepare(&self, params: Option<&Value>) -> Result<Box<dyn PreparedCheck>, CheckError> {
            let pass = params
                .and_then(Value::as_bool)
                .ok_or_else(|| CheckError("params must be a bool".into()))?;
            Ok(Box::new(NoScoreRun(pass)))
        }
    }
    impl PreparedCheck for NoScoreRun {
        fn run(&self, _: &Value) -> CheckResult {
            CheckResult {
                passed: self.0,
                score: None,
                details: None,
            }
        }
    }
    let mut registry = CheckFunctionRegistry::with_builtins();
    registry.register("no_score", Box::new(NoScore));
    let s = spec(
        json!({"method": "composite", "mode": "weighted", "weights": [0.6, 0.4], "steps": [
            {"method": "deterministic_check", "checkName": "no_score", "checkParams": true},
            {"method": "deterministic_check", "checkName": "no_score", "checkParams": false}
        ]}),
    );
    let r = VerificationPlan::compile(&s, &registry)
        .unwrap()
        .run(&json!(null));
    assert_eq!(r.score, Some(0.6));
    assert!(!r.passed);
    assert!(VerificationPlan::compile(
        &spec(json!({"method": "deterministic_check", "checkName": "no_score"})),
        &registry
    )
    .unwrap_err()
    .to_string()
    .contains("params must be a bool"));
}

#[test]
fn nested_composites_to_any_depth() {
    let mut s = step(true);
    for i in 0..20 {
        let mode = ["all_pass", "majority"][i % 2];
        s = json!({"method": "composite", "mode": mode, "steps": [s, step(true)]});
    }
    s = json!({"method": "composite", "mode": "weighted", "weights": [0.25, 0.75], "steps": [step(false), s]});
    let r = run(s, json!(true));
    assert!(r.passed);
    assert_eq!(r.score, Some(0.75));
}

#[test]
fn invalid_specs_anywhere_are_errors_not_passes() {
    // The bad step comes after a failing one that all_pass would stop at: still invalid.
    let e = invalid(json!({"method": "composite", "mode": "all_pass", "steps": [
        step(false),
        {"method": "composite", "mode": "majority", "steps": [{"method": "deterministic_check", "checkName": "nope"}]}
    ]}));
    assert!(e.contains("verification.steps[1].steps[0]"), "{e}");
    assert!(e.contains("unknown check function \"nope\""), "{e}");
    assert!(
        invalid(json!({"method": "composite", "mode": "all_pass", "steps": []}))
            .contains("at least one step")
    );
    assert!(
        invalid(json!({"method": "llm_judge", "judgePrompt": "x", "passThreshold": 0.5}))
            .contains("llm_judge")
    );
    assert!(
        invalid(json!({"method": "composite", "mode": "unanimous", "steps": [step(true)]}))
            .contains("unanimous")
    );
    assert!(
        invalid(json!({"method": "schema_match", "schema": {}, "steps": []})).contains("steps")
    );
}

#[test]
fn check_results_serialize_like_the_reference() {
    assert_eq!(
        serde_json::to_value(CheckResult::pass()).unwrap(),
        json!({"passed": true, "score": 1.0})
    );
    assert_eq!(
        String::from_utf8(delegateos::canonical::canonicalize(&CheckResult::fail("x")).unwrap())
            .unwrap(),
        r#"{"details":"x","passed":false,"score":0}"#
    );
}
