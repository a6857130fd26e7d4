//! `uploadBlob`, `getBlob`.

use crate::helpers::TestServer;

/// A 1×1 PNG.
pub(crate) const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_stored_with_the_type_sniffed_from_their_bytes() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;".to_vec();
    let jpeg: Vec<u8> = vec![
        0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0x01, 0x01, 0x00, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x01, 0x00, 0x01, 0x03,
        0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xff, 0xd9,
    ];
    let webp = [
        b"RIFF".as_slice(),
        &[0x1a, 0, 0, 0],
        b"WEBPVP8L",
        &[
            0x0d, 0, 0, 0, 0x2f, 0, 0, 0, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0,
        ],
    ]
    .concat();
    for (bytes, claimed, expected) in [
        (PNG.to_vec(), "image/jpeg", "image/png"),
        (gif, "application/octet-stream", "image/gif"),
        (jpeg, "image/png", "image/jpeg"),
        (webp, "image/webp", "image/webp"),
    ] {
        let r = api
            .call_raw("uploadBlob", &[], claimed, bytes.clone())
            .await;
        assert_eq!(r.status, 201, "{expected}: {:?}", r.body);
        assert_eq!(
            r.body["content_type"], expected,
            "sniffed, not taken from Content-Type"
        );
        let got = api
            .call("getBlob", &[r.body["id"].as_str().unwrap()], &[], None)
            .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.headers["content-type"], expected);
        assert_eq!(got.bytes, bytes, "{expected}: byte for byte");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_images_are_400_and_more_than_5_mib_is_413() {
    let server = TestServer::spawn().await;
    let api = server.api();
    for (what, bytes) in [
        ("text", b"hello".to_vec()),
        ("empty", Vec::new()),
        ("pdf", b"%PDF-1.4\n".to_vec()),
        ("truncated png", PNG[..4].to_vec()),
    ] {
        let r = api.call_raw("uploadBlob", &[], "image/png", bytes).await;
        assert_eq!(r.status, 400, "{what}");
    }
    let mut big = PNG.to_vec();
    big.resize(5 * 1024 * 1024 + 1, 0);
    let r = api.call_raw("uploadBlob", &[], "image/png", big).await;
    assert_eq!(r.status, 413);
    let mut exactly = PNG.to_vec();
    exactly.resize(5 * 1024 * 1024, 0);
    assert_eq!(
        api.call_raw("uploadBlob", &[], "image/png", exactly)
            .await
            .status,
        201,
        "5 MiB exactly is allowed"
    );
    assert_eq!(api.call("getBlob", &["nope"], &[], None).await.status, 404);
}
