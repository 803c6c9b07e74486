//! A loopback HTTP/1.1 file server for tests: serves a directory with Range
//! support, logs requests, and injects faults per path.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status, every time.
    Status(u16),
    /// Answer with this status for the first `n` requests, then serve.
    StatusTimes(u16, usize),
    /// Send headers and this many body bytes, then hang.
    Stall(usize),
    /// First request: send this many bytes and close the connection.
    DropAfter(usize),
    /// Send the body a byte every half second (until stopped).
    Trickle,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub range: Option<String>,
}

pub struct Server {
    pub port: u16,
    root: PathBuf,
    faults: Arc<Mutex<HashMap<String, (Fault, usize)>>>,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    pub fn start(root: PathBuf) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let faults: Arc<Mutex<HashMap<String, (Fault, usize)>>> = Arc::default();
        let log: Arc<Mutex<Vec<Request>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (r, f, l, s) = (root.clone(), faults.clone(), log.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (r, f, l, s) = (r.clone(), f.clone(), l.clone(), s.clone());
                thread::spawn(move || {
                    let _ = handle(conn, &r, &f, &l, &s);
                });
            }
        });
        Server {
            port,
            root,
            faults,
            log,
            stop,
        }
    }

    pub fn url(&self, prefix: &str) -> String {
        format!("http://127.0.0.1:{}/{prefix}", self.port)
    }

    pub fn fault(&self, path: &str, fault: Fault) {
        self.faults
            .lock()
            .unwrap()
            .insert(path.to_string(), (fault, 0));
    }

    pub fn clear_faults(&self) {
        self.faults.lock().unwrap().clear();
    }

    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.log.lock().unwrap().clear();
    }

    pub fn root(&self) -> &PathBuf {
        &self.root
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn handle(
    mut conn: TcpStream,
    root: &Path,
    faults: &Mutex<HashMap<String, (Fault, usize)>>,
    log: &Mutex<Vec<Request>>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut range = None;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h
                .strip_prefix("range: ")
                .or_else(|| h.strip_prefix("Range: "))
            {
                range = Some(v.to_string());
            }
        }
        log.lock().unwrap().push(Request {
            path: path.clone(),
            range: range.clone(),
        });
        let rel = path.trim_start_matches('/');
        let fault = {
            let mut f = faults.lock().unwrap();
            f.get_mut(rel).map(|(fault, count)| {
                *count += 1;
                (fault.clone(), *count)
            })
        };
        let data = std::fs::read(root.join(rel)).ok();
        match (fault, data) {
            (Some((Fault::Status(code), _)), _) => return status(&mut conn, code),
            (Some((Fault::StatusTimes(code, n), count)), _) if count <= n => {
                status(&mut conn, code)?;
                continue;
            }
            (_, None) => {
                status(&mut conn, 404)?;
                continue;
            }
            (Some((Fault::Stall(n), _)), Some(data)) => {
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    data.len()
                )?;
                conn.write_all(&data[..n.min(data.len())])?;
                conn.flush()?;
                for _ in 0..600 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                return Ok(());
            }
            (Some((Fault::Trickle, _)), Some(data)) => {
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    data.len()
                )?;
                for b in data.iter() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    conn.write_all(&[*b])?;
                    conn.flush()?;
                    thread::sleep(Duration::from_millis(500));
                }
                return Ok(());
            }
            (Some((Fault::DropAfter(n), 1)), Some(data)) => {
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    data.len()
                )?;
                conn.write_all(&data[..n.min(data.len())])?;
                return Ok(());
            }
            (_, Some(data)) => {
                let start = range
                    .as_deref()
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.strip_suffix('-'))
                    .and_then(|n| n.parse::<usize>().ok());
                match start {
                    Some(s) if s < data.len() => {
                        write!(
                            conn,
                            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {s}-{}/{}\r\n\r\n",
                            data.len() - s,
                            data.len() - 1,
                            data.len()
                        )?;
                        conn.write_all(&data[s..])?;
                    }
                    _ => {
                        write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                            data.len()
                        )?;
                        conn.write_all(&data)?;
                    }
                }
            }
        }
        conn.flush()?;
        let _ = reader.get_mut().read(&mut [0u8; 0]);
    }
}

fn status(conn: &mut TcpStream, code: u16) -> std::io::Result<()> {
    let body = format!("status {code}\n");
    write!(
        conn,
        "HTTP/1.1 {code} X\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}
