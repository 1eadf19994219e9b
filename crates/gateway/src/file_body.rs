//! A response body that streams an open file the filesystem service left
//! for this gateway (cumulo-filesystem's `stream`): `CHUNK` bytes at a time,
//! read off the event loop, each only when the client has taken the one
//! before.

use bytes::Bytes;
use cumulo_filesystem::stream::{FilePart, CHUNK};
use hyper::body::{Body, Frame, SizeHint};
use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;

/// A response body that reads its file `CHUNK` bytes at a time, off the
/// event loop, only when the client has taken the previous chunk.
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    reading: Option<JoinHandle<std::io::Result<Vec<u8>>>>,
}

impl FileBody {
    pub fn new(part: FilePart) -> FileBody {
        FileBody { file: Arc::new(part.file), offset: part.offset, remaining: part.len, reading: None }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let this = &mut *self;
        let reading = this.reading.get_or_insert_with(|| {
            let (file, offset, n) = (this.file.clone(), this.offset, this.remaining.min(CHUNK as u64) as usize);
            tokio::task::spawn_blocking(move || {
                let mut buf = vec![0; n];
                let got = file.read_at(&mut buf, offset)?;
                buf.truncate(got);
                Ok(buf)
            })
        });
        let read = match Pin::new(reading).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        this.reading = None;
        let chunk = read.map_err(std::io::Error::other)??;
        if chunk.is_empty() {
            // The file shrank after its length was announced: end the response
            // early (the client sees a short body) rather than pad it.
            this.remaining = 0;
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while it was sent",
            ))));
        }
        this.offset += chunk.len() as u64;
        this.remaining -= chunk.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cumulo_filesystem::stream::{put, take, Part};
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_file_part_streams_in_chunks() {
        let path = std::env::temp_dir().join(format!("cumulo-stream-{}", std::process::id()));
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let part = FilePart { file: File::open(&path).unwrap(), offset: 10, len: 150_000 };
        let id = put(Part::File(part)).unwrap();
        let Some(Part::File(part)) = take(id.as_bytes()) else { panic!("not the file part") };
        let mut body = FileBody::new(part);
        assert_eq!(body.size_hint().exact(), Some(150_000));
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.unwrap().into_data().unwrap();
            assert!(chunk.len() <= CHUNK);
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, &data[10..150_010]);
        std::fs::remove_file(&path).unwrap();
    }
}
