//! Worker processes: a crash or a hang costs one seed and the run goes on.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tritium_fuzz::pool::{run, Event, PoolConfig};

/// A stand-in worker (a shell loop speaking the protocol): seed 13 kills itself, seed 17
/// goes silent, every other seed passes except 15, which fails with a report.
fn fake_worker(first: u64, count: u64) -> Command {
    let script = format!(
        r#"s={first}; end=$(({first} + {count}))
while [ $s -lt $end ]; do
  echo "start $s"
  if [ $s -eq 13 ]; then kill -9 $$; fi
  if [ $s -eq 17 ]; then exec sleep 30; fi
  if [ $s -eq 15 ]; then echo "| cpu: element 3 differs"; echo "done $s fail const,store cpu=5"
  else echo "done $s ok const cpu=5,interpreter=7"; fi
  s=$((s + 1))
done"#
    );
    let mut c = Command::new("sh");
    c.args(["-c", &script]);
    c
}

#[test]
fn crashes_and_hangs_cost_one_seed_each() {
    let config = PoolConfig {
        jobs: 2,
        batch: 4,
        hang: Duration::from_secs(2),
        deadline: None,
    };
    let mut events = Vec::new();
    run(Arc::new(fake_worker), 10, 12, config, &mut |e| {
        events.push(e)
    });
    let mut done: Vec<u64> = Vec::new();
    let mut crashed = Vec::new();
    for e in &events {
        match e {
            Event::Done {
                seed, ok, report, ..
            } => {
                done.push(*seed);
                assert_eq!(*ok, *seed != 15, "seed {seed}");
                if *seed == 15 {
                    assert_eq!(report, &vec!["cpu: element 3 differs".to_string()]);
                    continue;
                }
                assert!(report.is_empty());
            }
            Event::Crashed { seed, why } => crashed.push((*seed, why.clone())),
        }
    }
    done.sort_unstable();
    crashed.sort_unstable();
    let want: Vec<u64> = (10..22).filter(|s| ![13, 17].contains(s)).collect();
    assert_eq!(done, want);
    assert_eq!(crashed.len(), 2, "{crashed:?}");
    assert_eq!(crashed[0].0, 13);
    assert!(crashed[0].1.contains("died"), "{:?}", crashed[0]);
    assert_eq!(crashed[1].0, 17);
    assert!(crashed[1].1.contains("hung"), "{:?}", crashed[1]);
    let timed = events.iter().find_map(|e| match e {
        Event::Done {
            seed: 10,
            kinds,
            times,
            ..
        } => Some((kinds.clone(), times.clone())),
        _ => None,
    });
    assert_eq!(
        timed,
        Some((
            vec!["const".to_string()],
            vec![
                ("cpu".to_string(), Duration::from_micros(5)),
                ("interpreter".to_string(), Duration::from_micros(7))
            ]
        ))
    );
}

/// A run with a deadline and no program limit ends: no batch starts after the deadline
/// (it used to spawn workers that had nothing left to do, forever).
#[test]
fn a_deadline_ends_an_unbounded_run() {
    let config = PoolConfig {
        jobs: 2,
        batch: 3,
        hang: Duration::from_secs(10),
        deadline: Some(std::time::SystemTime::now() + Duration::from_millis(300)),
    };
    let start = std::time::Instant::now();
    let mut done = 0u64;
    // Seeds from 100: none crashes or hangs.
    run(Arc::new(fake_worker), 100, u64::MAX, config, &mut |e| {
        assert!(matches!(e, Event::Done { .. }), "{e:?}");
        done += 1;
    });
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "ran {:?}",
        start.elapsed()
    );
    assert!(done > 0);
}
