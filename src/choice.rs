//! Named choices a front end offers by name (an objective, a sweep backend, a starter
//! template): the library states the names and their help, the CLI (and the Python package)
//! parse them, so the library needs no argument-parsing crate.
//!
//! Each `impl Choice` lives beside its type (`vocab::PowerBoundary`, `engine::Objective`,
//! `sweep::Backend`, `templates::Template`), so this trait imports nothing of the crate.

/// A closed set of named values.
pub trait Choice: Sized + Copy + PartialEq + 'static {
    /// (name, value, one-line help), in the order a front end lists them.
    const ALL: &'static [(&'static str, Self, &'static str)];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _, _)| *n == s).map(|c| c.1)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|c| c.1 == self)
            .map(|c| c.0)
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Speed {
        Slow,
        Fast,
    }

    impl Choice for Speed {
        const ALL: &'static [(&'static str, Self, &'static str)] =
            &[("slow", Self::Slow, "Slowly"), ("fast", Self::Fast, "Fast")];
    }

    #[test]
    fn names_round_trip() {
        for (n, v, _) in Speed::ALL {
            assert_eq!(Speed::parse(n), Some(*v));
            assert_eq!(v.name(), *n);
        }
        assert_eq!(Speed::parse("speed"), None);
    }
}
