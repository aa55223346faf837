//! Offers as DelegateOS contracts: the price becomes the budget through the
//! currency table (an unknown currency is refused), the output schema the
//! verification, and the draft signs into a contract the pivot accepts.

mod examples;

use agenta::{offer_to_contract, Currencies, Offer, Schemas, Untranslatable};
use delegateos::{CheckFunctionRegistry, ContractId, Keypair, Timestamp};
use examples::offer;
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
    assert_eq!(c["verification"]["schema"], offer()["output_schema"]);
    assert_eq!(c["task"]["outputSchema"], offer()["output_schema"]);
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
