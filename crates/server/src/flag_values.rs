//! Value parsers shared by the CLI flags of `livecount-agent serve` and `drive` (clap
//! prefixes each message with the flag and the value): finite numbers, bounded seconds,
//! shares. A leaf: the flag structs import it, it imports none of them.

use std::time::Duration;

/// The longest duration any flag takes: a week. A deadline computed from a flag
/// (`Instant::now() + d`) therefore cannot overflow.
pub(crate) const MAX_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// A finite number: `NaN`, `inf` and words are refused.
pub(crate) fn finite(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err("expected a finite number".into()),
    }
}

/// Seconds in `min..=max`, as a `Duration` (which `max` keeps far from overflowing).
pub(crate) fn seconds(
    min: f64,
    max: f64,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| {
        let s = finite(text)?;
        if (min..=max).contains(&s) {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(format!(
                "{} s is out of range (allowed {min}..={max} s)",
                text.trim()
            ))
        }
    }
}

/// A share in `0..=1`.
pub(crate) fn share(text: &str) -> Result<f64, String> {
    let x = finite(text)?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is out of range (allowed 0..=1)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keeps_its_bounds_inclusive_and_refuses_the_rest() {
        let parse = seconds(0.5, 2.0);
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse(" 2 "), Ok(Duration::from_secs(2)));
        for bad in ["0.49", "2.01", "NaN", "inf", "two"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn share_is_zero_to_one() {
        assert_eq!((share("0"), share("1")), (Ok(0.0), Ok(1.0)));
        for bad in ["-0.1", "1.1", "NaN"] {
            assert!(share(bad).is_err(), "{bad}");
        }
    }
}
