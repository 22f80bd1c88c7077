use ravi_capabilities::tools::calculator::{MAX_LEN, eval, evaluate, format_number, parse};

/// The calculator's parser and evaluator on arbitrary text: never a panic; `evaluate` is
/// exactly `parse` then `eval`; input over the length limit is refused; a finite result,
/// formatted as the tool prints it, reads back as the same number.
pub fn calculator(data: &[u8]) {
    let Some(src) = crate::typed_input::<&str>(data) else {
        return;
    };
    let direct = evaluate(src);
    if src.len() > MAX_LEN {
        assert!(
            direct.is_err(),
            "over-long input accepted: {} bytes",
            src.len()
        );
    }
    let staged = parse(src).and_then(|e| eval(&e));
    match (&direct, &staged) {
        (Ok(a), Ok(b)) => assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "{src:?}: {a} vs {b}"
        ),
        (Err(_), Err(_)) => {}
        _ => panic!("evaluate and parse+eval disagree on {src:?}: {direct:?} vs {staged:?}"),
    }
    if let Ok(v) = direct
        && v.is_finite()
    {
        let text = format_number(v);
        if text.len() <= MAX_LEN {
            let back = evaluate(&text);
            assert!(
                matches!(back, Ok(b) if b == v),
                "{src:?} = {v}, printed {text:?}, read back as {back:?}"
            );
        }
    }
}
