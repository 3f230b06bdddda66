//! `serve --max-terminals-per-owner`: one owner's spawns past its quota
//! are `429 TOO_MANY_TERMINALS` (spawns racing each other included),
//! another owner's still work, and a kill makes room again.

use super::Served;
use crate::support::within;

#[tokio::test]
async fn an_owner_past_its_quota_gets_429_and_others_still_spawn() {
    within(async {
        let cli = crate::cli::Cli::new();
        let file = super::token_file(&cli, "alicealicealiceal alice\nbobbobbobbobbobbo bob\n");
        let mut served = Served::start_with(
            cli,
            &["--token-file", &file, "--max-terminals-per-owner", "3"],
            &[],
        )
        .await;
        served.token = "alicealicealiceal".to_owned();
        let body = r#"{"command":["sh"]}"#;
        let racing: Vec<_> = (0..8)
            .map(|_| served.post("/api/terminals", body))
            .collect();
        let answers = futures_util::future::join_all(racing).await;
        let created = answers.iter().filter(|(status, _)| *status == 201).count();
        assert_eq!(created, 3, "{answers:?}");
        for (status, answer) in answers.iter().filter(|(status, _)| *status != 201) {
            assert_eq!(
                (*status, answer["error"]["code"].as_str()),
                (429, Some("TOO_MANY_TERMINALS")),
                "{answer}"
            );
        }
        served.token = "bobbobbobbobbobbo".to_owned();
        let bobs = served.spawn(body).await;
        served.token = "alicealicealiceal".to_owned();
        let (_, list) = served.get("/api/terminals").await;
        let first = list[0]["id"].as_str().unwrap().to_owned();
        served
            .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{first}")))
            .await;
        let (status, _) = served.post("/api/terminals", body).await;
        assert_eq!(status, 201, "a kill made room");
        let (_, list) = served.get("/api/terminals").await;
        for terminal in list.as_array().unwrap() {
            let id = terminal["id"].as_str().unwrap();
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{id}")))
                .await;
        }
        served.token = "bobbobbobbobbobbo".to_owned();
        let id = bobs["id"].as_str().unwrap();
        served
            .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{id}")))
            .await;
    })
    .await;
}
