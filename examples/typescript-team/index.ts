// A team's training on an existing ACK cluster in TypeScript, from the platform's component
// package; the same stack as examples/yaml-stack, with the training image and a token given
// as outputs (a registry's URL, a secret):
//   pulumi package add <path or git URL of this repository>/package
//   pulumi config set --secret kubeconfig "$(cat ~/.kube/ack)"
//   pulumi config set trainingImage registry-vpc.cn-hangzhou.aliyuncs.com/team-a/trainer:v1.4.2
//   pulumi config set --secret hfToken <token>
//   pulumi up
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as platform from "@pulumi/ack-training-platform";

const config = new pulumi.Config();
const cluster = new k8s.Provider("cluster", { kubeconfig: config.requireSecret("kubeconfig") });
const image = pulumi.output(config.require("trainingImage"));

const team = new platform.TeamTraining("team", {
    provider: cluster,
    namespace: { namespace: "team-a", gpuQuota: 4 },
    storage: { storageClassName: "alibabacloud-cnfs-nas", createStorageClass: false },
    pool: {
        name: "a10",
        instanceTypes: ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"],
        gpusPerNode: 1,
        spotStrategy: "SpotAsPriceGo",
        maxSize: 4,
    },
    jobs: [
        {
            name: "finetune",
            image: image,
            cpu: "6",
            memory: "24Gi",
            env: { HF_TOKEN: config.requireSecret("hfToken") },
            trainer: { model: "gpt", maxSteps: 20000, batchSize: 16 },
        },
    ],
});

export const namespace = team.namespace;
export const jobs = team.jobs;
