package etcd

// StartEtcdForTest serves the embedded etcd of the tests to the external test package.
var StartEtcdForTest = startEtcd
