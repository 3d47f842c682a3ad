//! slurmrestd end to end: started beside a local cluster, answering on its Unix socket
//! (`rest_auth/local` for the test's own uid) and refusing what it cannot authenticate.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{Restd, Via};

#[test]
fn ping_answers_every_version_and_unauthenticated_tcp_is_refused() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    for v in ["v0.0.38", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"] {
        let a = r.get(&format!("/slurm/{v}/ping/"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = a.json();
        assert_eq!(j["errors"], serde_json::json!([]), "{v}");
        let up = if v == "v0.0.38" {
            &j["pings"][0]["ping"]
        } else {
            &j["pings"][0]["pinged"]
        };
        assert_eq!(up, "UP", "{v}: {j}");
    }
    let refused = r.call(Via::Tcp, "GET", "/slurm/v0.0.42/ping", &[], None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(refused.json()["errors"][0]["error_number"], 6000);
    let spec = r.get("/openapi/v3").json();
    assert!(
        spec["paths"]["/slurm/v0.0.38/ping/"]["get"].is_object(),
        "{spec}"
    );
}
