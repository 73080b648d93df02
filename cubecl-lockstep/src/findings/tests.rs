use super::*;

#[test]
fn the_mode_is_report_unless_fail_is_asked() {
    assert_eq!(Mode::parse(None), Ok(Mode::Report));
    assert_eq!(Mode::parse(Some("")), Ok(Mode::Report));
    assert_eq!(Mode::parse(Some("report")), Ok(Mode::Report));
    assert_eq!(Mode::parse(Some(" fail ")), Ok(Mode::Fail));
    assert_eq!(
        Mode::parse(Some("strict")),
        Err(
            "LOCKSTEP_CUBECL_FINDINGS=\"strict\": expected `report` (the default) or `fail`"
                .to_owned()
        )
    );
}

#[test]
fn a_device_without_a_sanitizer_finds_nothing() {
    let mut findings = Findings::new(None, Mode::Fail);
    assert_eq!(findings.enqueued(), None);
    assert!(findings.collect(&[0]).is_empty());
}
