//! Sanitizer reports reach the Perfetto trace (`lockstep replay --trace`): each as an instant
//! event on the track of the launch that raised it, its exact text the `report` argument, and
//! the lines `replay` prints.

use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments};
use lockstep_explore::perfetto::{report_lines, trace_json};
use lockstep_kernels::ops::faulty::{self, LANES};
use lockstep_sim::{SimConfig, SimDevice};

#[test]
fn a_racy_launch_puts_its_reports_on_its_track() {
    let config = SimConfig {
        record_trace: true,
        ..SimConfig::new(1)
    };
    let device = SimDevice::new(config);
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let values: Vec<f32> = (0..2 * LANES).map(|v| v as f32).collect();
    let input = c.create(Bytes::from_elems(&values)).unwrap();
    let out = c.create(Bytes::from_elems(&[0.0f32; 2])).unwrap();
    let args = KernelArguments::new().binding(&input).binding(&out);
    c.launch(&faulty::racy_reduce(), CubeCount::Static(2, 1, 1), args)
        .unwrap();
    c.sync().unwrap();

    let observations = probe.observations();
    let reports: Vec<String> = observations.reports.iter().map(|r| r.to_string()).collect();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let report = &reports[0];
    // Seed 1's interleaving of the first workgroup.
    assert_eq!(
        report,
        "launch of `racy_reduce`: race: shared array 0 index 16: invocation 16 (workgroup [0, 0, 0], \
         local [16, 0, 0]) wrote it at statement 7 `s0[local_id.x] = (s0[local_id.x] + \
         s0[(local_id.x + 32u)])`, and invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) read \
         it at statement 9 `s0[local_id.x] = (s0[local_id.x] + s0[(local_id.x + 16u)])`, with no \
         barrier between them"
    );
    let launch = observations
        .entries
        .iter()
        .find(|e| e.op == "launch")
        .expect("the launch ran");
    assert_eq!(launch.reports, reports);
    assert!(
        observations
            .entries
            .iter()
            .filter(|e| e.op != "launch")
            .all(|e| e.reports.is_empty())
    );

    let json = trace_json(&observations.entries);
    let instants: Vec<&serde_json::Value> = json["traceEvents"]
        .as_array()
        .expect("a list of events")
        .iter()
        .filter(|e| e["ph"] == "i")
        .collect();
    assert_eq!(instants.len(), 1);
    let instant = instants[0];
    assert_eq!(instant["name"], "sanitizer report");
    assert_eq!(instant["args"]["report"].as_str(), Some(report.as_str()));
    assert_eq!(instant["args"]["operation"], "launch racy_reduce x128");
    assert_eq!(instant["tid"], launch.stream);
    assert_eq!(instant["ts"], launch.start_ns as f64 / 1000.0);
    assert!(
        json.to_string()
            .contains(&serde_json::to_string(report).unwrap())
    );

    assert_eq!(
        report_lines(&observations.entries),
        [format!(
            "sanitizer report at {} ns on stream {} (launch racy_reduce x128): {report}",
            launch.start_ns, launch.stream
        )]
    );
}
