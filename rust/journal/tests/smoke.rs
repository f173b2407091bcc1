mod common;
use common::*;

#[test]
fn smoke_append_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    {
        let (j, rep) = open(dir.path());
        assert!(rep.records.is_empty());
        for i in 0..500u64 {
            let op = add(i, &payload(i, 300));
            model.apply(&op);
            j.append(vec![op], i % 3 == 0).unwrap();
            if i % 5 == 0 && i > 0 {
                let op = del(i - 1);
                model.apply(&op);
                j.append(vec![op], true).unwrap();
            }
            if i % 7 == 0 {
                let op = update(i, b"upd");
                model.apply(&op);
                j.append(vec![op], false).unwrap();
            }
        }
        let s = j.stats();
        eprintln!("{s:?}");
        j.close().unwrap();
    }
    let (j, rep) = open(dir.path());
    assert_eq!(rep.records, model.list());
    assert_eq!(rep.torn_tail, None);
    eprintln!("{:?}", j.stats());
    eprintln!("{:?}", data_files(dir.path()));
}
