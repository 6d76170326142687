use super::{cluster, sessions_of};
use herald_store::sessions::RunRow;

fn run(id: &str, status: &str) -> RunRow {
    RunRow {
        id: id.into(),
        session_id: "s".into(),
        status: status.into(),
        model: "m".into(),
        created_at: 1.0,
        updated_at: 2.0,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_fails_its_own_runs_and_a_lost_instance_s_runs_fail_when_its_heartbeat_ends()
 {
    let db = "runs_lost";
    let a = sessions_of(db, "a").await;
    let b = sessions_of(db, "b").await;
    a.save_run(run("a1", "running")).await.unwrap();
    a.save_run(run("a2", "completed")).await.unwrap();
    b.save_run(run("b1", "waiting_for_approval")).await.unwrap();
    // Both alive: nothing is failed.
    assert_eq!(a.fail_unfinished_runs("restarted".into()).await.unwrap(), 0);
    // `a` restarts on its home (a new process of instance `a`): its old run fails
    // at once; `b`'s, whose heartbeat holds, stays.
    drop(a);
    let a = sessions_of(db, "a").await;
    assert_eq!(a.fail_unfinished_runs("restarted".into()).await.unwrap(), 1);
    let a1 = a.run("a1".into()).await.unwrap().unwrap();
    assert_eq!(
        (a1.status.as_str(), a1.error.as_deref()),
        ("failed", Some("restarted"))
    );
    assert_eq!(
        a.run("b1".into()).await.unwrap().unwrap().status,
        "waiting_for_approval"
    );
    // `b` is lost (its heartbeat ran out): the next sweep fails its run.
    drop(b);
    cluster()
        .psql(
            db,
            "UPDATE herald_instances SET alive_until_ms = 0 WHERE owner LIKE 'b@%'",
        )
        .unwrap();
    assert_eq!(a.fail_unfinished_runs("restarted".into()).await.unwrap(), 1);
    let b1 = a.run("b1".into()).await.unwrap().unwrap();
    assert_eq!(
        (b1.status.as_str(), b1.error.as_deref()),
        ("failed", Some(herald_scale::INSTANCE_LOST))
    );
    assert_eq!(
        a.run("a2".into()).await.unwrap().unwrap().status,
        "completed"
    );
}
