//! A small argument parser: `--name value`, `--name=value`, `--flag` (with
//! no `=value`), and everything after `--` kept as is.

use std::collections::VecDeque;

/// A usage error, printed as one line.
#[derive(Debug)]
pub struct Usage(pub String);

pub struct Args {
    rest: VecDeque<String>,
}

impl Args {
    pub fn new(args: impl IntoIterator<Item = String>) -> Args {
        Args {
            rest: args.into_iter().collect(),
        }
    }

    /// The next argument that is not an option, if any is left before `--`.
    pub fn positional(&mut self, what: &str) -> Result<String, Usage> {
        match self.rest.front() {
            Some(a) if !a.starts_with("--") => Ok(self.rest.pop_front().unwrap_or_default()),
            _ => Err(Usage(format!("missing {what}"))),
        }
    }

    /// Parses the options up to `--` or the end, calling `on` with each name
    /// and a way to take its value. Non-option arguments are kept.
    pub fn options(
        &mut self,
        mut on: impl FnMut(&str, &mut dyn FnMut() -> Result<String, Usage>) -> Result<(), Usage>,
    ) -> Result<(), Usage> {
        let mut kept = VecDeque::new();
        while let Some(arg) = self.rest.pop_front() {
            if arg == "--" {
                self.rest.push_front(arg);
                break;
            }
            let Some(option) = arg.strip_prefix("--") else {
                kept.push_back(arg);
                continue;
            };
            let (name, mut inline) = match option.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (option.to_owned(), None),
            };
            let rest = &mut self.rest;
            let mut value = || -> Result<String, Usage> {
                if let Some(v) = inline.take() {
                    return Ok(v);
                }
                match rest.front() {
                    Some(v) if v != "--" => Ok(rest.pop_front().unwrap_or_default()),
                    _ => Err(Usage(format!("--{name} needs a value"))),
                }
            };
            on(&name, &mut value)?;
            // A flag leaves its inline value untaken: `--no-wait=false`
            // must not pass for `--no-wait`.
            if inline.is_some() {
                return Err(Usage(format!("--{name} takes no value")));
            }
        }
        kept.append(&mut self.rest);
        self.rest = kept;
        Ok(())
    }

    /// Everything after `--`.
    pub fn command(&mut self) -> Result<Vec<String>, Usage> {
        match self.rest.iter().position(|a| a == "--") {
            Some(i) => {
                let command: Vec<String> = self.rest.drain(i..).skip(1).collect();
                if command.is_empty() {
                    return Err(Usage("missing COMMAND after --".into()));
                }
                Ok(command)
            }
            None => Err(Usage("missing -- COMMAND [ARGS...]".into())),
        }
    }

    /// Fails on anything left over.
    pub fn finish(&mut self) -> Result<(), Usage> {
        match self.rest.pop_front() {
            None => Ok(()),
            Some(extra) => Err(Usage(format!("unexpected argument {extra:?}"))),
        }
    }
}

/// Parses a number option, naming the option in the error.
pub fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, Usage> {
    value
        .parse()
        .map_err(|_| Usage(format!("--{name}: {value:?} is not a valid number")))
}
