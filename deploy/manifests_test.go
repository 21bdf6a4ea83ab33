package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The Kubernetes manifests are validated here, offline: kubeconform and kubectl's server-side
// validation need schemas or an API server this machine cannot reach. Each document is decoded
// into its k8s.io/api type with unknown fields refused (sigs.k8s.io/yaml.UnmarshalStrict: a typo or
// a misplaced field fails), then the fields the API server would require and the references
// between the objects (selectors, named ports, the ConfigMap key, the env the config reads) are
// checked.

const manifestDir = "kubernetes"

// manifests reads every YAML document under deploy/kubernetes, keyed "file#index".
func manifests(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", manifestDir, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufioReader(b))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			out[fmt.Sprintf("%s#%d", f, i)] = doc
		}
	}
	return out
}

// objects is every manifest decoded strictly into its typed object.
type objects struct {
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
}

func decodeAll(t *testing.T) objects {
	t.Helper()
	o := objects{map[string]*corev1.ConfigMap{}, map[string]*corev1.Service{}, map[string]*appsv1.StatefulSet{}}
	for where, doc := range manifests(t) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj interface{ GetName() string }
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			cm := &corev1.ConfigMap{}
			obj, o.configMaps[where] = cm, cm
		case "v1 Service":
			svc := &corev1.Service{}
			obj, o.services[where] = svc, svc
		case "apps/v1 StatefulSet":
			sts := &appsv1.StatefulSet{}
			obj, o.statefulSets[where] = sts, sts
		default:
			t.Fatalf("%s: unexpected kind %q %q (add it to the validator)", where, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s: %s: %v", where, tm.Kind, err)
			continue
		}
		if msgs := validName(obj.GetName()); len(msgs) > 0 {
			t.Errorf("%s: metadata.name %q: %v", where, obj.GetName(), msgs)
		}
	}
	return o
}

func TestManifestsDecodeStrictly(t *testing.T) {
	o := decodeAll(t)
	if len(o.configMaps) != 1 || len(o.services) != 2 || len(o.statefulSets) != 1 {
		t.Fatalf("want 1 ConfigMap, 2 Services, 1 StatefulSet; got %d, %d, %d",
			len(o.configMaps), len(o.services), len(o.statefulSets))
	}
}

// A field name the types do not know must fail: the strict decoding is what catches typos.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selectr: {a: b}\n  ports: [{port: 1}]\n")
	if err := yaml.UnmarshalStrict(doc, &corev1.Service{}); err == nil || !strings.Contains(err.Error(), "selectr") {
		t.Fatalf("UnmarshalStrict accepted an unknown field: %v", err)
	}
}

func TestStatefulSet(t *testing.T) {
	o := decodeAll(t)
	var cm *corev1.ConfigMap
	for _, c := range o.configMaps {
		cm = c
	}
	for where, sts := range o.statefulSets {
		s := sts.Spec
		check := func(ok bool, format string, args ...any) {
			t.Helper()
			if !ok {
				t.Errorf("%s: StatefulSet %s: %s", where, sts.Name, fmt.Sprintf(format, args...))
			}
		}
		check(s.Selector != nil && len(s.Selector.MatchLabels) > 0, "spec.selector.matchLabels is required")
		if s.Selector != nil {
			check(subset(s.Selector.MatchLabels, s.Template.Labels), "selector %v does not match the pod template labels %v",
				s.Selector.MatchLabels, s.Template.Labels)
		}
		check(s.ServiceName != "", "spec.serviceName is required")
		var governing *corev1.Service
		for _, svc := range o.services {
			if svc.Name == s.ServiceName {
				governing = svc
			}
		}
		check(governing != nil && governing.Spec.ClusterIP == corev1.ClusterIPNone,
			"spec.serviceName %q must name a headless Service of deploy/kubernetes", s.ServiceName)

		pod := s.Template.Spec
		check(len(pod.Containers) == 1, "want one container, got %d", len(pod.Containers))
		if len(pod.Containers) != 1 {
			continue
		}
		c := pod.Containers[0]
		check(c.Name != "" && c.Image != "", "container name and image are required")
		check(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot,
			"the pod must run as non-root")
		check(c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem &&
			c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation,
			"the container must have a read-only root file system and no privilege escalation")

		// POD_NAME from the downward API: the collector_name and the telemetry's collector label.
		var podName *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "POD_NAME" {
				podName = &c.Env[i]
			}
		}
		check(podName != nil && podName.ValueFrom != nil && podName.ValueFrom.FieldRef != nil &&
			podName.ValueFrom.FieldRef.FieldPath == "metadata.name", "env POD_NAME must come from fieldRef metadata.name")
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
				ref := e.ValueFrom.ResourceFieldRef
				check(ref.ContainerName == "" || ref.ContainerName == c.Name, "env %s: resourceFieldRef.containerName %q is not the container", e.Name, ref.ContainerName)
				q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
				check(ok && !q.IsZero(), "env %s reads %s, which the container does not set", e.Name, ref.Resource)
			}
		}
		if cm != nil {
			cfg := cm.Data["config.yaml"]
			for _, v := range []string{"${env:POD_NAME}"} {
				check(strings.Contains(cfg, v), "the ConfigMap's config.yaml should read %s", v)
			}
		}

		// Probes and volumes refer to things that exist.
		ports := map[string]int32{}
		for _, p := range c.Ports {
			check(p.Name != "" && len(p.Name) <= 15, "container port %d needs a name of at most 15 characters", p.ContainerPort)
			ports[p.Name] = p.ContainerPort
		}
		for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			check(probe != nil && probe.HTTPGet != nil, "%sProbe.httpGet is required", name)
			if probe != nil && probe.HTTPGet != nil {
				check(portExists(probe.HTTPGet.Port, ports), "%sProbe port %s is not a container port", name, probe.HTTPGet.Port.String())
			}
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = v
		}
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			check(ok, "volumeMount %q has no volume", m.Name)
			if ok && v.ConfigMap != nil {
				check(cm != nil && cm.Name == v.ConfigMap.Name, "volume %q names ConfigMap %q, not in deploy/kubernetes", v.Name, v.ConfigMap.Name)
				for _, it := range v.ConfigMap.Items {
					_, has := cm.Data[it.Key]
					check(has, "volume %q wants ConfigMap key %q", v.Name, it.Key)
				}
			}
		}
		wantArg := "--config=/etc/otelgateway/config.yaml"
		check(slices.Contains(c.Args, wantArg), "args must include %s", wantArg)
		check(slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/otelgateway" }),
			"the config volume must be mounted at /etc/otelgateway")

		// Every Service selects these pods and targets a named container port.
		for swhere, svc := range o.services {
			if !subset(svc.Spec.Selector, s.Template.Labels) {
				t.Errorf("%s: Service %s selector %v does not select the StatefulSet's pods %v", swhere, svc.Name, svc.Spec.Selector, s.Template.Labels)
			}
			for _, p := range svc.Spec.Ports {
				if p.Port < 1 || p.Port > 65535 || p.Name == "" {
					t.Errorf("%s: Service %s: port %+v needs a name and a port in 1-65535", swhere, svc.Name, p)
				}
				if !portExists(p.TargetPort, ports) {
					t.Errorf("%s: Service %s: targetPort %s is not a container port of %s", swhere, svc.Name, p.TargetPort.String(), sts.Name)
				}
			}
		}
		check(len(c.Resources.Requests) > 0 && c.Resources.Limits.Memory().Cmp(resource.MustParse("64Mi")) >= 0,
			"resources: requests and a memory limit are required")
	}
}

// ---------------------------------------------------------------------------------------------

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func portExists(p intstr.IntOrString, named map[string]int32) bool {
	if p.Type == intstr.String {
		_, ok := named[p.StrVal]
		return ok
	}
	for _, n := range named {
		if n == p.IntVal {
			return true
		}
	}
	return false
}

// validName is the DNS-1123 subdomain rule for object names.
func validName(name string) []string {
	if name == "" {
		return []string{"required"}
	}
	if len(name) > 253 {
		return []string{"longer than 253 characters"}
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' || r == '.') && i > 0 && i < len(name)-1
		if !ok {
			return []string{fmt.Sprintf("invalid character %q at %d (DNS-1123 subdomain)", r, i)}
		}
	}
	return nil
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}
