package operator

// deployment.go records which deployment a state record belongs to and
// checks it at start (issue 18): two deployments that share a key and a
// release namespace draw the same noise for the same window, so a state
// topic that shows another deployment's identity must not be continued
// silently.

import (
	"fmt"
	"slices"
	"strings"
)

// deployment returns this deployment's identity, with the cluster id the
// brokers reported.
func (o *Operator) deployment(clusterID string) *deploymentRecord {
	k := o.cfg.Kafka
	d := &deploymentRecord{
		ClusterID:   clusterID,
		OutputTopic: k.OutputTopic,
		GroupID:     k.GroupID,
		Namespace:   k.namespace(),
		InputTopics: slices.Sorted(slices.Values(k.InputTopics)),
	}
	if k.ScaleOut {
		d.PartialsTopic = k.partialsTopic()
	}
	return d
}

// deploymentDiff is one field in which a recorded identity differs from
// this deployment's.
type deploymentDiff struct {
	field, recorded, now string
	refuse               bool
}

// diffDeployment compares the identity recorded in the state topic (rec)
// with this deployment's (now). Differences that mean the state describes
// another deployment's releases refuse the start:
//
//   - the output topic: the recorded output offsets, the windows it says
//     are final and the ledger belong to releases in another topic, and a
//     deployment with the same namespace and configuration publishing
//     there draws the same noise for the same windows (a state topic
//     shared by two deployments);
//   - the consumer group (the record's own key, so only a record copied by
//     hand differs).
//
// Differences that a deployment goes through legitimately only warn:
//
//   - the cluster id: a migration to a new cluster (MirrorMaker, a
//     restored backup) keeps the state topic; but a copy of the state
//     running beside the original draws the same noise, hence a warning
//     that says so;
//   - the release namespace and the input topics: configuration changes
//     that change the release digest, so the noise, and that the ledger
//     already checks against the horizon's budget (plan.reconcile);
//   - the partials topic (scale-out): partials in flight in the old topic
//     are not read, so the windows they belong to wait (the
//     merge_partitions_missing gauge) until their input is replayed.
func diffDeployment(rec, now *deploymentRecord) []deploymentDiff {
	var out []deploymentDiff
	add := func(field, r, n string, refuse bool) {
		if r != n {
			out = append(out, deploymentDiff{field, r, n, refuse})
		}
	}
	add("kafka.output_topic", rec.OutputTopic, now.OutputTopic, true)
	add("kafka.group_id", rec.GroupID, now.GroupID, true)
	if rec.ClusterID != "" && now.ClusterID != "" {
		add("Kafka cluster id", rec.ClusterID, now.ClusterID, false)
	}
	add("kafka.release_namespace", rec.Namespace, now.Namespace, false)
	add("kafka.input_topics", strings.Join(rec.InputTopics, ","), strings.Join(now.InputTopics, ","), false)
	if rec.PartialsTopic != "" && now.PartialsTopic != "" {
		add("kafka.partials_topic", rec.PartialsTopic, now.PartialsTopic, false)
	}
	return out
}

// checkDeployment refuses to continue a state record written by another
// deployment (see diffDeployment) and warns about the differences a
// deployment may legitimately go through. A record without an identity
// (written before identities were recorded) is accepted; the next record
// written carries this deployment's.
func (o *Operator) checkDeployment(rec *recovered) error {
	if rec.deployment == nil || o.identity == nil {
		return nil
	}
	k := o.cfg.Kafka
	var refused []string
	for _, d := range diffDeployment(rec.deployment, o.identity) {
		if d.refuse {
			refused = append(refused, fmt.Sprintf("%s is %q, the state records %q", d.field, d.now, d.recorded))
			continue
		}
		switch d.field {
		case "Kafka cluster id":
			o.log.Warn("the state topic was written on another Kafka cluster (a migration, or a copy of the state): "+
				"if the deployment on the other cluster still publishes, both draw the same noise for the same windows; "+
				"stop one of them, or give each its own key", "state_topic", k.stateTopic(), "recorded", d.recorded, "now", d.now)
		default:
			o.log.Warn("the state topic was written with another "+d.field+"; continuing (the release digest, so the noise, "+
				"changes with it, and the ledger is checked)", "state_topic", k.stateTopic(), "recorded", d.recorded, "now", d.now)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: state topic %s, group %s was written by another deployment: %s. Give every deployment its own "+
			"state topic (the default, <output_topic>.state) and its own key, or restore the recorded settings",
			ErrState, k.stateTopic(), k.GroupID, strings.Join(refused, "; "))
	}
	return nil
}

// stamp returns s with what every state record carries besides its
// progress: the partials cutoff and this deployment's identity.
func (o *Operator) stamp(rec *recovered, s stateRecord) stateRecord {
	s.PartialsBoundFrom = rec.boundFrom
	s.Deployment = o.identity
	return s
}
