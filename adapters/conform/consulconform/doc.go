// Package consulconform answers "is the simulator telling the truth
// about Consul and etcd?": it runs drawn sequences of every call the
// Consul semaphore recipe (model/consulsem) makes of its backend on
// sim/consulsim and on a private real server, and compares the answers
// step by step (Differential; differential.go says what is compared, and
// when a sequence cannot be judged); and it holds the simulated cluster
// to a real one, faults on it included (ClusterDifferential,
// clusterdiff.go). It backs `lockprover conform --kind consul-semaphore`,
// with --cluster for the second.
//
// It lives beside the other differentials (adapters/conform), not in the
// simulator, so that sim/consulsim imports no server's client: the
// differential speaks to Consul over its HTTP API and to etcd through
// clientv3, by consulsem's own backends. The real cluster is the
// family's runner's (adapters/runners/consulsemrun's Cluster.ConformTarget),
// which the CLI hands to ClusterDifferential as a Cluster.
package consulconform
