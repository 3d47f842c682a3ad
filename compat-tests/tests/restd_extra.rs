//! slurmrestd's reservations and licenses, every version (v0.0.38, v0.0.41–v0.0.44), and
//! shares (v0.0.41–v0.0.44), end to end: a local cluster, slurmrestd on its Unix socket.
//! Flotilla has no reservations or licenses, so those lists are empty and a named
//! reservation is Slurm's error for an unknown one; shares are sshare's tree.
//!
//! Every answer is validated against the schema slurmrestd serves (`/openapi/v3`, strictly)
//! and against the real clients' models (`slurmrestapi` 25.11.4; the v0.0.38 client for
//! v0.0.38); v0.0.38's answers are shaped as real 22.05.8's recordings
//! (`goldens-rest/v0.0.38/{reservations,licenses}.json`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{check_models, check_models_38, golden38, shape_differences, Checker, Restd};
use serde_json::json;

const VERSIONS: [&str; 4] = ["v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"];

#[test]
fn reservations_and_licenses_are_empty_and_shares_are_sshares_in_every_version() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let mut ck = Checker::new(&r);
    for v in VERSIONS {
        let p = |s: &str| format!("/slurm/{v}/{s}");
        let m = |s: &str| format!("V00{}{s}", &v[5..]);
        let a = r.get(&p("reservations/"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("reservations/"), &m("OpenapiReservationResp"));
        assert_eq!((&j["reservations"], &j["errors"]), (&json!([]), &json!([])), "{j:#}");
        assert_eq!(j["last_update"]["set"], true, "{j:#}");
        let a = r.get(&p("reservations/?update_time=0"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        ck.check(&a, "get", &p("reservations/"), &m("OpenapiReservationResp"));
        let a = r.get(&p("reservations/?update_time=soon"));
        assert_eq!(a.status, 422, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("reservations/"), &m("OpenapiReservationResp"));
        assert_eq!(j["errors"][0]["error_number"], 9000, "{j:#}");
        // 25.11's _get_single_reservation: ESLURM_REST_INVALID_QUERY for an unknown name.
        let a = r.get(&p("reservation/maint"));
        assert_eq!(a.status, 422, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("reservation/{reservation_name}"), &m("OpenapiReservationResp"));
        assert_eq!(j["errors"][0]["error_number"], 9000, "{j:#}");
        assert_eq!(j["errors"][0]["description"], "Unable to find reservation maint", "{j:#}");
        assert_eq!(j["reservations"], json!([]));
        let a = r.get(&p("licenses/"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("licenses/"), &m("OpenapiLicensesResp"));
        assert_eq!((&j["licenses"], &j["errors"]), (&json!([]), &json!([])), "{j:#}");
        // Shares: the fair-share tree sshare shows, root first.
        let a = r.get(&p("shares"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("shares"), &m("OpenapiSharesResp"));
        assert_eq!(j["errors"], json!([]), "{j:#}");
        let rows = j["shares"]["shares"].as_array().expect("shares list").clone();
        assert_eq!(rows.first().map(|r| &r["name"]), Some(&json!("root")), "{j:#}");
        assert_eq!(rows[0]["type"], json!(["ASSOCIATION"]), "{j:#}");
        let a = r.get(&p("shares?accounts=root&users=nobody-here&colour=blue"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = ck.check(&a, "get", &p("shares"), &m("OpenapiSharesResp"));
        assert!(j["shares"]["shares"].as_array().unwrap().iter().all(|r| r["type"] == json!(["ASSOCIATION"])), "{j:#}");
        assert!(j["warnings"][0]["description"].as_str().unwrap_or("").contains("colour"), "{j:#}");
    }
    check_models(&ck.seen).unwrap_or_else(|e| panic!("the slurmrestapi models refuse answers:\n{e}"));

    // v0.0.38, against 22.05.8's recordings and the v0.0.38 client's models.
    ck.seen.clear();
    let p = |s: &str| format!("/slurm/v0.0.38/{s}");
    for (name, path, model) in [("reservations", "reservations/", "V0038ReservationsResponse"), ("licenses", "licenses/", "V0038Licenses")] {
        let g = golden38(name);
        let a = r.get(&p(path));
        assert_eq!(u64::from(a.status), g["status"].as_u64().unwrap(), "{name}: {}", a.body);
        let ours = ck.check(&a, "get", &p(path), model);
        let mut theirs = g["response"].clone();
        // The meta block is compared by the other v0.0.38 tests; here the answer's own keys.
        let (mut o, t) = (ours.clone(), theirs.as_object_mut().unwrap());
        o.as_object_mut().unwrap().remove("meta");
        t.remove("meta");
        let diff = shape_differences(name, &o, &theirs);
        assert!(diff.is_empty(), "{name}: {diff:#?}");
        assert_eq!(ours[name], g["response"][name], "{name}: {ours:#}");
        assert_eq!(ours["errors"], json!([]));
        if name == "licenses" {
            // 22.05's spec gives `v0.0.38_licenses` no `meta`, yet 22.05.8 sends one (the
            // recording): the served schema has it (checked above); the model is given the rest.
            let last = ck.seen.last_mut().unwrap();
            last.1.as_object_mut().unwrap().remove("meta");
        }
    }
    // 22.05's reservations.c: ESLURM_RESERVATION_INVALID, status 500, for an unknown name.
    let a = r.get(&p("reservation/maint"));
    assert_eq!(a.status, 500, "{}", a.body);
    let j = ck.check(&a, "get", &p("reservation/{reservation_name}"), "V0038ReservationsResponse");
    assert_eq!(j["errors"][0]["error_number"], 2053, "{j:#}");
    check_models_38(&ck.seen).unwrap_or_else(|e| panic!("the v0.0.38 client's models refuse answers:\n{e}"));
}
