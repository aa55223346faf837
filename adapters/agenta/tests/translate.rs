//! Offers as DelegateOS contracts: the price becomes the budget through the
//! currency table (an unknown currency is refused), the output schema the
//! verification, and the draft signs into a contract the pivot accepts.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod examples;

use std::collections::BTreeMap;

use agenta::{
    attestation_to_receipt, offer_to_contract, receipt_to_attestation, Currencies,
    ExecutionReceipt, MessageType, Offer, ReceiptContext, Schemas, Untranslatable,
};
use delegateos::attestation::{verify_attestation, AttestationContext};
use delegateos::{
    AttestationId, CheckFunctionRegistry, ContractId, DelegationId, Keypair, Timestamp,
};
use examples::{offer, receipt};
use serde_json::json;

fn usd() -> Currencies {
    Currencies::new([
        ("USD".to_owned(), 1_000_000),
        ("JPY".to_owned(), 100_000_000),
    ])
}

#[test]
fn an_offer_becomes_a_contract_the_pivot_signs_and_checks() {
    let schemas = Schemas::new().unwrap();
    let o: Offer = schemas.parse(&offer()).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let draft = offer_to_contract(&o, &usd(), now).unwrap();
    let gateway = Keypair::from_seed([3; 32]);
    let contract = draft
        .sign(
            &gateway,
            ContractId::from_bytes([1; 6]),
            Timestamp::from_instant(now),
            &CheckFunctionRegistry::with_builtins(),
        )
        .unwrap();
    contract.verify_signature().unwrap();
    contract
        .check_content(&CheckFunctionRegistry::with_builtins())
        .unwrap();
    let c = serde_json::to_value(&contract).unwrap();
    // 250 cents at a million microcents each.
    assert_eq!(c["constraints"]["maxBudgetMicrocents"], 250_000_000u64);
    assert_eq!(c["constraints"]["maxChainDepth"], 0);
    assert_eq!(
        c["constraints"]["requiredCapabilities"],
        json!(["agenta:execute"])
    );
    assert_eq!(
        c["constraints"]["deadline"],
        json!(Timestamp::from_instant(now + time::Duration::seconds(120)))
    );
    assert_eq!(c["verification"]["method"], "schema_match");
    let result_schema = &c["verification"]["schema"]["properties"]["result"];
    assert_eq!(result_schema, &offer()["output_schema"]);
    assert_eq!(c["task"]["outputSchema"], c["verification"]["schema"]);
    assert_eq!(c["task"]["inputs"]["agentaOfferId"], "offer.summarize-1");
    assert_eq!(c["task"]["inputs"]["verificationMode"], "buyer_verified");
    assert_eq!(
        agenta::translate::offer_resource(&o.offer_id),
        "offer:offer.summarize-1"
    );
}

#[test]
fn an_unknown_currency_or_an_amount_too_large_is_refused() {
    let schemas = Schemas::new().unwrap();
    let mut v = offer();
    v["pricing"]["currency"] = json!("EUR");
    let o: Offer = schemas.parse(&v).unwrap();
    let now = time::OffsetDateTime::now_utc();
    assert_eq!(
        offer_to_contract(&o, &usd(), now).unwrap_err(),
        Untranslatable::UnknownCurrency("EUR".into())
    );
    v["pricing"]["currency"] = json!("JPY");
    v["pricing"]["amount"] = json!(u64::MAX / 2);
    let o: Offer = schemas.parse(&v).unwrap();
    assert!(matches!(
        offer_to_contract(&o, &usd(), now),
        Err(Untranslatable::TooLarge { .. })
    ));
}

/// Whether the pivot's verifier accepts `att` under `contracts`.
fn verifies(
    att: &delegateos::Attestation,
    contracts: &BTreeMap<ContractId, delegateos::TaskContract>,
) -> bool {
    let ctx = AttestationContext {
        contracts,
        children: &BTreeMap::new(),
        registry: &CheckFunctionRegistry::with_builtins(),
    };
    verify_attestation(att, &ctx).unwrap().valid
}

/// A final receipt becomes an attestation the gateway signs, which verifies
/// against the offer's contract (its result against the output schema); and
/// back, the attestation is a receipt the Agenta schema accepts.
#[test]
fn a_receipt_becomes_an_attestation_that_verifies_and_back() {
    let schemas = Schemas::new().unwrap();
    let o: Offer = schemas.parse(&offer()).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let gateway = Keypair::from_seed([3; 32]);
    let contract = offer_to_contract(&o, &usd(), now)
        .unwrap()
        .sign(
            &gateway,
            ContractId::from_bytes([1; 6]),
            Timestamp::from_instant(now),
            &CheckFunctionRegistry::with_builtins(),
        )
        .unwrap();
    let delegation = DelegationId::from_bytes([2; 6]);
    let as_received = receipt();
    let r: ExecutionReceipt = schemas.parse(&as_received).unwrap();
    let draft =
        receipt_to_attestation(&r, &as_received, &contract.id, &delegation, &usd()).unwrap();
    let att = draft
        .sign(
            &gateway,
            AttestationId::from_bytes([3; 6]),
            Timestamp::from_instant(now),
        )
        .unwrap();
    assert!(att.result.success);
    assert_eq!(att.result.cost_microcents, 250_000_000);
    let output = att.result.output.clone().unwrap();
    assert_eq!(output["result"], as_received["result"]);
    assert_eq!(
        output["evidence"]["receiptDigest"],
        agenta::translate::digest(&as_received).unwrap()
    );
    assert!(output["evidence"]["receiptDigest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(output["evidence"]["artifacts"][0]["digest"], "sha256:00ff");
    let contracts = BTreeMap::from([(contract.id.clone(), contract.clone())]);
    assert!(verifies(&att, &contracts));

    // A result that breaks the offer's output schema fails verification.
    let mut wrong = receipt();
    wrong["result"] = serde_json::json!({"text": "no summary"});
    let w: ExecutionReceipt = schemas.parse(&wrong).unwrap();
    let bad = receipt_to_attestation(&w, &wrong, &contract.id, &delegation, &usd())
        .unwrap()
        .sign(
            &gateway,
            AttestationId::from_bytes([4; 6]),
            Timestamp::from_instant(now),
        )
        .unwrap();
    assert!(!verifies(&bad, &contracts));

    // And back.
    let context = ReceiptContext {
        request_id: "req-00000001",
        offer_id: "offer.summarize-1",
        offer_version: "3",
        seller_agent_id: "seller-agent",
        buyer_agent_id: "buyer-agent",
        currency: "USD",
    };
    let back = attestation_to_receipt(&att, &context, &usd()).unwrap();
    schemas
        .validate(MessageType::ExecutionReceipt, &back)
        .unwrap();
    assert_eq!(back["result"], as_received["result"]);
    assert_eq!(back["status"], "completed");
    assert_eq!(back["financials"]["final_amount"], 250);
    assert_eq!(
        back["artifacts"][0]["uri"],
        format!("urn:delegateos:attestation:{}", att.id)
    );
    assert_eq!(
        back["artifacts"][0]["digest"],
        agenta::translate::digest(&serde_json::to_value(&att).unwrap()).unwrap()
    );
}

/// Only a final receipt attests anything.
#[test]
fn receipts_that_are_not_final_attest_nothing() {
    let schemas = Schemas::new().unwrap();
    for status in ["accepted", "in_progress", "rejected"] {
        let mut v = receipt();
        v["status"] = serde_json::json!(status);
        let r: ExecutionReceipt = schemas.parse(&v).unwrap();
        assert_eq!(
            receipt_to_attestation(
                &r,
                &v,
                &ContractId::from_bytes([1; 6]),
                &DelegationId::from_bytes([2; 6]),
                &usd()
            )
            .unwrap_err(),
            Untranslatable::NotFinal(status.into())
        );
    }
}
