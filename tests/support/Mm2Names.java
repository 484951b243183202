// MirrorMaker 2's own answers, from the pinned jars, for tests/unit/test_mm2_names.py.
// stdin: one case per line, tab-separated: policy separator source target topics excludes topic
// stdout: per case, tab-separated: remote checkpoints offsetSyncs internal heartbeats cycle replicates
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.connect.mirror.*;

public class Mm2Names {
    public static void main(String[] args) throws Exception {
        Class<?> connector = MirrorSourceConnector.class;
        Constructor<?> make = connector.getDeclaredConstructor(SourceAndTarget.class, ReplicationPolicy.class,
                TopicFilter.class, ConfigPropertyFilter.class);
        make.setAccessible(true);
        Method replicates = connector.getDeclaredMethod("shouldReplicateTopic", String.class);
        replicates.setAccessible(true);
        Method cycle = connector.getDeclaredMethod("isCycle", String.class);
        cycle.setAccessible(true);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] c = line.split("\t", -1);
            Map<String, Object> conf = new HashMap<>();
            conf.put("replication.policy.separator", c[1]);
            conf.put("source.cluster.alias", c[2]);
            DefaultReplicationPolicy policy = c[0].equals("identity") ? new IdentityReplicationPolicy() : new DefaultReplicationPolicy();
            policy.configure(conf);
            DefaultTopicFilter filter = new DefaultTopicFilter();
            filter.configure(Map.of("topics", c[4], "topics.exclude", c[5]));
            Object source = make.newInstance(new SourceAndTarget(c[2], c[3]), policy, filter, new DefaultConfigPropertyFilter());
            String topic = c[6];
            System.out.println(String.join("\t", policy.formatRemoteTopic(c[2], topic), policy.checkpointsTopic(c[2]),
                    policy.offsetSyncsTopic(c[2]), String.valueOf(policy.isInternalTopic(topic)),
                    String.valueOf(policy.isHeartbeatsTopic(topic)), String.valueOf(cycle.invoke(source, topic)),
                    String.valueOf(replicates.invoke(source, topic))));
        }
    }
}
